//! Protocol, limits and security tests.
