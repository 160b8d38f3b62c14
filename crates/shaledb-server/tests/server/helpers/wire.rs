//! The wire: a plain TCP connection, a RESP2/RESP3 reply reader and a small client on it, for tests that
//! look at replies exactly as the server sends them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A plain TCP connection to `addr` with 10-second read and write timeouts (a test never hangs).
pub fn raw(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("read timeout");
    s.set_write_timeout(Some(Duration::from_secs(10))).expect("write timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// A reply as read off the wire (RESP2 and RESP3).
#[derive(Debug, Clone, PartialEq)]
pub enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Resp>),
    Map(Vec<(Resp, Resp)>),
    Set(Vec<Resp>),
    Double(String),
    Bool(bool),
    Verbatim(String),
    /// A RESP3 push frame (`>`).
    Push(Vec<Resp>),
}

impl Resp {
    /// The text of a simple string, bulk string or verbatim string.
    pub fn text(&self) -> String {
        match self {
            Resp::Simple(s) | Resp::Verbatim(s) | Resp::Double(s) => s.clone(),
            Resp::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("not a string: {other:?}"),
        }
    }

    pub fn array(self) -> Vec<Resp> {
        match self {
            Resp::Array(v) | Resp::Set(v) | Resp::Push(v) => v,
            other => panic!("not an array: {other:?}"),
        }
    }
}

/// Encodes a request as a multibulk.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A client on a buffered connection.
pub struct Client {
    pub r: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client { r: BufReader::new(raw(addr)) }
    }

    /// A connection, or `None` when nothing answers at `addr` (a node still starting).
    pub fn try_connect(addr: SocketAddr) -> Option<Client> {
        let s = TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(500)).ok()?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(10))).ok()?;
        Some(Client { r: BufReader::new(s) })
    }

    pub fn send(&mut self, args: &[&str]) {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.r.get_mut().write_all(&encode(&a)).expect("send");
    }

    /// Sends a request of binary words and reads its reply.
    pub fn cmd_bytes(&mut self, args: &[&[u8]]) -> Resp {
        self.r.get_mut().write_all(&encode(args)).expect("send");
        self.read().expect("a reply")
    }

    /// Sends a request and reads its reply.
    pub fn cmd(&mut self, args: &[&str]) -> Resp {
        self.send(args);
        self.read().expect("a reply")
    }

    /// Reads one reply; `None` when the server closed the connection.
    pub fn read(&mut self) -> Option<Resp> {
        read_reply(&mut self.r)
    }

    /// True when the server closed the connection (EOF or reset) within the read timeout.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.r.read(&mut b), Ok(0) | Err(_)) && self.r.buffer().is_empty()
    }
}

fn read_line(r: &mut impl BufRead) -> Option<String> {
    let mut line = Vec::new();
    let n = r.read_until(b'\n', &mut line).ok()?;
    if n == 0 {
        return None;
    }
    assert!(line.ends_with(b"\r\n"), "a reply line not ended by CRLF: {line:?}");
    line.truncate(line.len() - 2);
    Some(String::from_utf8_lossy(&line).into_owned())
}

/// Reads one RESP2/RESP3 reply.
pub fn read_reply(r: &mut impl BufRead) -> Option<Resp> {
    let line = read_line(r)?;
    let (tag, rest) = line.split_at(1);
    let int = |s: &str| s.parse::<i64>().unwrap_or_else(|_| panic!("bad number in {line:?}"));
    Some(match tag {
        "+" => Resp::Simple(rest.into()),
        "-" => Resp::Error(rest.into()),
        ":" => Resp::Int(int(rest)),
        "_" => Resp::Nil,
        "#" => Resp::Bool(rest == "t"),
        "," => Resp::Double(rest.into()),
        "$" | "=" => {
            let n = int(rest);
            if n < 0 {
                return Some(Resp::Nil);
            }
            let mut b = vec![0u8; n as usize + 2];
            r.read_exact(&mut b).ok()?;
            b.truncate(n as usize);
            if tag == "=" {
                Resp::Verbatim(String::from_utf8_lossy(&b[4..]).into_owned())
            } else {
                Resp::Bulk(b)
            }
        }
        "*" | "~" | ">" => {
            let n = int(rest);
            if n < 0 {
                return Some(Resp::Nil);
            }
            let items = (0..n).map(|_| read_reply(r)).collect::<Option<Vec<_>>>()?;
            if tag == "~" {
                Resp::Set(items)
            } else if tag == ">" {
                Resp::Push(items)
            } else {
                Resp::Array(items)
            }
        }
        "%" => {
            let n = int(rest);
            let mut pairs = Vec::new();
            for _ in 0..n {
                pairs.push((read_reply(r)?, read_reply(r)?));
            }
            Resp::Map(pairs)
        }
        _ => panic!("unknown reply type in {line:?}"),
    })
}
