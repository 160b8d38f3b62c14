//! The fuzz driver of the request parser.

use super::{Args, Limits, Parser, ProtocolError, Reply};
use bytes::BytesMut;

/// The fuzz driver of the `resp` target (and its corpus replay on stable): arbitrary bytes go through a
/// [`Parser`] with small limits, fed in pieces whose sizes the first bytes choose, and every request parsed is
/// looked up in the command table and checked for arity, as a connection does (no engine). Checks, by
/// panicking (which the fuzzer reports): the requests and the error are the same whatever the split, and
/// neither the read buffer nor the parser ever holds more than the input plus a bounded slack.
pub fn fuzz_requests(data: &[u8]) {
    let limits = Limits { max_bulk_len: 1 << 16, max_multibulk_len: 1 << 10, max_inline_len: 1 << 12 };
    let (seed, input) = match data.split_first() {
        Some((&s, rest)) => (s, rest),
        None => (0, data),
    };
    let whole = parse_in_pieces(limits, input, &[]);
    // Piece sizes 1..=16 from the input itself, cycling through the seed.
    let sizes: Vec<usize> = input.iter().take(64).map(|&b| 1 + ((b ^ seed) as usize % 16)).collect();
    let split = parse_in_pieces(limits, input, &sizes);
    assert_eq!(whole, split, "a different result when the input arrives in pieces");
    if let Ok(requests) = &whole.0 {
        let mut out = BytesMut::new();
        for args in requests {
            let reply = match args.first().and_then(|n| crate::commands::lookup(n)) {
                None => crate::commands::unknown_command(args),
                Some(spec) if !spec.arity_ok(args.len()) => crate::commands::wrong_arity(spec.name),
                Some(_) => Reply::Ok,
            };
            reply.encode(2, &mut out);
        }
    }
}

/// Parses `input` fed in pieces of `sizes` (cycled; all at once when empty): every request parsed, then the
/// protocol error if one stopped it, and whether the input ended inside a request. Asserts the memory bounds.
#[allow(clippy::type_complexity)] // A test helper's one result: (requests, error, ended inside a request).
fn parse_in_pieces(
    limits: Limits,
    input: &[u8],
    sizes: &[usize],
) -> (Result<Vec<Args>, (Vec<Args>, ProtocolError)>, bool) {
    let mut p = Parser::new(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0;
    let mut i = 0;
    // Slack: one reservation step for a bulk in progress plus what BytesMut rounds up to.
    let slack = (1 << 20) + 2 * limits.max_bulk_len + 4096;
    while fed < input.len() || i == 0 {
        let n = if sizes.is_empty() { input.len() } else { sizes[i % sizes.len()] };
        let end = (fed + n).min(input.len());
        buf.extend_from_slice(&input[fed..end]);
        fed = end;
        i += 1;
        loop {
            match p.next(&mut buf) {
                Ok(Some(args)) => out.push(args),
                Ok(None) => break,
                Err(e) => return (Err((out, e)), p.in_request()),
            }
        }
        assert!(
            buf.capacity() <= fed + slack && p.held_bytes() <= fed + 16 * (limits.max_multibulk_len + 1),
            "memory beyond the input: buffer {} held {} fed {fed}",
            buf.capacity(),
            p.held_bytes()
        );
        if fed >= input.len() {
            break;
        }
    }
    (Ok(out), p.in_request() || !buf.is_empty())
}
