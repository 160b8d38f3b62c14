//! Loopback ports for tests that start servers.

use std::sync::atomic::{AtomicU32, Ordering};

/// A free port of 127.0.0.1 (bound, then released), taken below the kernel's ephemeral range: a node keeps its
/// ports across a restart, and an ephemeral port (a client connection's local port, another test's `bind(0)`,
/// this process's previous `bind(0)` handed out again) could otherwise take it between the check and the
/// server's bind. Spread over 10000..low by the process id, stepping through the range within a process, so two
/// calls never return the same port and concurrent test processes seldom try the same ones. Falls back to an
/// ephemeral port when the range starts too low.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    if low > 20_000 {
        let span = low - 10_000;
        let start = std::process::id().wrapping_mul(7919) % span;
        for _ in 0..200 {
            let port = 10_000 + (start + NEXT.fetch_add(1, Ordering::Relaxed) * 131) % span;
            if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
                return port as u16;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}
