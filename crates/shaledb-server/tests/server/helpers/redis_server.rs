//! A real redis-server (7.0 is the reference) for the tests that compare replies with it: started on a free
//! loopback port with `--save "" --appendonly no`; where it is not installed, [`start_redis`] says why and the
//! test skips.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server on a free loopback port, in a temporary directory of its own, killed on drop.
pub struct RedisServer {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// [`start_redis`], or `None` with the reason printed (to both streams, so it shows with and without
/// `--nocapture`) where redis-server cannot run: the comparison is then skipped, the only skip these tests make.
pub fn redis_or_skip() -> Option<RedisServer> {
    match start_redis() {
        Ok(r) => Some(r),
        Err(why) => {
            println!("comparison with redis-server skipped: {why}");
            eprintln!("comparison with redis-server skipped: {why}");
            None
        }
    }
}

/// Starts redis-server, or says why it cannot.
pub fn start_redis() -> Result<RedisServer, String> {
    match Command::new("redis-server").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => return Err(format!("`redis-server --version` failed: {}", String::from_utf8_lossy(&o.stderr))),
        Err(e) => return Err(format!("redis-server is not installed ({e})")),
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    for _ in 0..5 {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting redis-server: {e}"))?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut server = RedisServer { child, addr, _dir: tempfile::tempdir().map_err(|e| e.to_string())? };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = server.child.try_wait() {
                break; // the port was taken meanwhile: try another
            }
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                server._dir = dir;
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(server);
    }
    Err("redis-server did not start listening".into())
}
