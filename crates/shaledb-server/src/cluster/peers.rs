//! What a member knows of the other replica groups (issue 44): their current leader and members, learned by
//! asking them, not told.
//!
//! The cluster map (map.rs) says which group owns which slots and names each group's nodes as they were when the
//! map was written; it is replicated through each group's log. Who leads another group changes with every
//! election there, and its members with every `add-node`: neither is worth a map change. So each member asks
//! the other groups about themselves, about once a second: `CLUSTER SHALEDB-GROUP` on their client port (the
//! last leader seen first, then the other nodes it knows), and keeps the last answer. What it learns only steers
//! redirections and what `CLUSTER SLOTS` lists first; which group owns a slot is never taken from an answer.

use super::map::SlotMap;
use super::node_name;
use shaledb_raft::{MemberAddr, NodeId};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How long one question to one node may take, connection included.
const ASK_TIMEOUT: Duration = Duration::from_millis(800);
/// An answer older than this no longer counts for `cluster_state:ok`.
pub const FRESH: Duration = Duration::from_secs(5);

/// The last answer from another group.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Its leader, when the member that answered knew one.
    pub leader: Option<NodeId>,
    /// Its members `(id, host:port@busport)`, as the member that answered knows them.
    pub nodes: Vec<(NodeId, String)>,
    /// When the last answer that named a leader came.
    pub led_at: Option<Instant>,
}

/// The answer to `CLUSTER SHALEDB-GROUP`, as read from another member.
#[derive(Debug, PartialEq)]
pub struct GroupAnswer {
    pub group: u64,
    pub epoch: u64,
    pub leader: Option<NodeId>,
    pub nodes: Vec<(NodeId, String)>,
}

/// Asks every other group of `map` (not `me`) about itself, all at once, and folds the answers into `known`.
pub async fn poll(map: &SlotMap, me: u64, auth: Option<&str>, known: &parking_lot::Mutex<HashMap<u64, Peer>>) {
    let asks = map.groups.iter().filter(|g| g.id != me).map(|g| {
        // The last leader seen first, then every node known (from the last answer, then from the map).
        let mut order: Vec<String> = Vec::new();
        {
            let k = known.lock();
            if let Some(p) = k.get(&g.id) {
                if let Some(addr) = p.leader.and_then(|l| p.nodes.iter().find(|(id, _)| *id == l)) {
                    order.push(addr.1.clone());
                }
                order.extend(p.nodes.iter().map(|(_, a)| a.clone()));
            }
        }
        order.extend(g.nodes.iter().map(|(_, a)| a.clone()));
        let mut seen = std::collections::HashSet::new();
        order.retain(|a| seen.insert(a.clone()));
        let gid = g.id;
        async move {
            let mut last = None;
            for addr in order {
                let Ok(parsed) = MemberAddr::parse(&addr) else { continue };
                match tokio::time::timeout(ASK_TIMEOUT, ask(&parsed.resp, auth)).await {
                    Ok(Ok(a)) if a.group == gid => {
                        let led = a.leader.is_some();
                        last = Some(a);
                        if led {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            (gid, last)
        }
    });
    let answers = futures_util::future::join_all(asks).await;
    let mut k = known.lock();
    k.retain(|gid, _| map.group(*gid).is_some() && *gid != me);
    for (gid, answer) in answers {
        let Some(a) = answer else { continue };
        let entry = k.entry(gid).or_insert(Peer { leader: None, nodes: Vec::new(), led_at: None });
        if !a.nodes.is_empty() {
            entry.nodes = a.nodes;
        }
        if a.leader.is_some() {
            entry.leader = a.leader;
            entry.led_at = Some(Instant::now());
        }
    }
}

/// One `CLUSTER SHALEDB-GROUP` round trip to the client port at `addr`.
async fn ask(addr: &str, auth: Option<&str>) -> std::io::Result<GroupAnswer> {
    let sock = TcpStream::connect(addr).await?;
    sock.set_nodelay(true)?;
    let mut r = BufReader::new(sock);
    let mut req = Vec::new();
    if let Some(pass) = auth {
        push_command(&mut req, &[b"AUTH", pass.as_bytes()]);
    }
    push_command(&mut req, &[b"CLUSTER", b"SHALEDB-GROUP"]);
    r.get_mut().write_all(&req).await?;
    if auth.is_some() {
        read_value(&mut r, 0).await?;
    }
    let v = read_value(&mut r, 0).await?;
    answer_of(&v).ok_or_else(|| bad(format!("an unexpected answer to CLUSTER SHALEDB-GROUP from {addr}: {v:?}")))
}

fn push_command(out: &mut Vec<u8>, words: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
    for w in words {
        out.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
        out.extend_from_slice(w);
        out.extend_from_slice(b"\r\n");
    }
}

/// A RESP value, as much as these answers use.
#[derive(Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Value>),
    Error(String),
    Simple(String),
}

fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// Most elements of an array and bytes of a string accepted in an answer; nesting deeper than 4 is refused.
const MAX_ELEMS: i64 = 65_536;
const MAX_BULK: i64 = 1 << 20;

fn read_value<'a>(
    r: &'a mut BufReader<TcpStream>,
    depth: usize,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Value>> + Send + 'a>> {
    Box::pin(async move {
        if depth > 4 {
            return Err(bad("an answer nested too deep".into()));
        }
        let mut line = Vec::new();
        (&mut *r).take(4096).read_until(b'\n', &mut line).await?;
        if !line.ends_with(b"\r\n") || line.len() < 3 {
            return Err(bad("a truncated answer line".into()));
        }
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        let num = || body.parse::<i64>().map_err(|_| bad(format!("'{body}' is not a number")));
        match line[0] {
            b'+' => Ok(Value::Simple(body)),
            b'-' => Ok(Value::Error(body)),
            b':' => Ok(Value::Int(num()?)),
            b'$' => {
                let n = num()?;
                if n < 0 {
                    return Ok(Value::Nil);
                }
                if n > MAX_BULK {
                    return Err(bad(format!("a string of {n} bytes")));
                }
                let mut buf = vec![0u8; n as usize + 2];
                r.read_exact(&mut buf).await?;
                buf.truncate(n as usize);
                Ok(Value::Bulk(buf))
            }
            b'*' => {
                let n = num()?;
                if n < 0 {
                    return Ok(Value::Nil);
                }
                if n > MAX_ELEMS {
                    return Err(bad(format!("an array of {n} elements")));
                }
                let mut out = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    out.push(read_value(r, depth + 1).await?);
                }
                Ok(Value::Array(out))
            }
            other => Err(bad(format!("an answer starting with byte {other}"))),
        }
    })
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::Bulk(b) => String::from_utf8(b.clone()).ok(),
        Value::Simple(s) => Some(s.clone()),
        _ => None,
    }
}

/// Reads `[group, epoch, leader, [[id, addr] ...], slots]`.
pub fn answer_of(v: &Value) -> Option<GroupAnswer> {
    let Value::Array(items) = v else { return None };
    let [Value::Int(group), Value::Int(epoch), leader, Value::Array(nodes), _slots] = items.as_slice() else {
        return None;
    };
    let leader = match text(leader)?.as_str() {
        "" => None,
        s => Some(super::parse_node_id(s)?),
    };
    let mut out = Vec::with_capacity(nodes.len());
    for n in nodes {
        let Value::Array(pair) = n else { return None };
        let [id, addr] = pair.as_slice() else { return None };
        let id = super::parse_node_id(&text(id)?)?;
        let addr = text(addr)?;
        MemberAddr::parse(&addr).ok()?;
        out.push((id, addr));
    }
    Some(GroupAnswer { group: u64::try_from(*group).ok()?, epoch: u64::try_from(*epoch).ok()?, leader, nodes: out })
}

/// The reply this member gives to `CLUSTER SHALEDB-GROUP`.
pub fn group_reply(
    group: u64,
    epoch: u64,
    leader: Option<NodeId>,
    nodes: &[(NodeId, String)],
    slots: &str,
) -> crate::resp::Reply {
    use crate::resp::Reply;
    Reply::Array(vec![
        Reply::Int(group as i64),
        Reply::Int(epoch as i64),
        Reply::bulk(leader.map(node_name).unwrap_or_default()),
        Reply::Array(
            nodes
                .iter()
                .map(|(id, a)| Reply::Array(vec![Reply::bulk(node_name(*id)), Reply::bulk(a.clone())]))
                .collect(),
        ),
        Reply::bulk(slots.to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_and_checked() {
        let b = |s: &str| Value::Bulk(s.as_bytes().to_vec());
        let good = Value::Array(vec![
            Value::Int(2),
            Value::Int(1),
            b(&node_name(7)),
            Value::Array(vec![Value::Array(vec![b(&node_name(7)), b("127.0.0.1:7000@17000")])]),
            b("0-5"),
        ]);
        let a = answer_of(&good).unwrap();
        assert_eq!(
            a,
            GroupAnswer { group: 2, epoch: 1, leader: Some(7), nodes: vec![(7, "127.0.0.1:7000@17000".into())] }
        );
        let no_leader = Value::Array(vec![Value::Int(2), Value::Int(1), b(""), Value::Array(vec![]), b("-")]);
        assert_eq!(answer_of(&no_leader).unwrap().leader, None);
        assert!(answer_of(&Value::Int(1)).is_none());
        let bad_addr = Value::Array(vec![
            Value::Int(2),
            Value::Int(1),
            b(""),
            Value::Array(vec![Value::Array(vec![b("7"), b("nowhere")])]),
            b("-"),
        ]);
        assert!(answer_of(&bad_addr).is_none());
        let neg = Value::Array(vec![Value::Int(-1), Value::Int(1), b(""), Value::Array(vec![]), b("-")]);
        assert!(answer_of(&neg).is_none());
    }
}
