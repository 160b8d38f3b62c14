//! `shaledb bench resp` as a user runs it: flag errors exit 2 with the flag named; a failed request makes
//! the exit status nonzero after the report is printed.

use std::io::{Read, Write};
use std::net::TcpListener;

mod common;
use common::shaledb;

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let (code, _, err) = shaledb(&["bench", "resp", "--concurrency", "1000"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("invalid value for --concurrency: 1000 is not in 1..=256"), "{err}");
    let (code, _, err) = shaledb(&["bench", "resp", "--host", "10.1.2.3"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--host") && err.contains("loopback"), "{err}");
    let (code, _, err) = shaledb(&["bench", "resp", "--benchmarks", "write-hotspot", "--hotspot", "0.9"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--hotspot"), "{err}");
}

#[test]
fn an_error_reply_makes_the_exit_nonzero() {
    // One connection, every request answered with an error.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 || s.write_all(b"-ERR nope\r\n").is_err() {
                    return;
                }
            }
        }
    });
    let p = port.to_string();
    let (code, out, err) = shaledb(&[
        "bench",
        "resp",
        "--port",
        &p,
        "-c",
        "1",
        "--num",
        "3",
        "--benchmarks",
        "write-seq",
        "--stats-interval-seconds",
        "0",
    ]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("write-seq    : latency us"), "{out}");
    assert!(err.contains("3 request(s) failed; first error (write-seq): ERR nope"), "{err}");
}
