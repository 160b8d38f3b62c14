//! Order-preserving encodings of column values (SKELETON, issue 13: being written).
