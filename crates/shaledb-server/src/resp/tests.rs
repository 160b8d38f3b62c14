//! Unit tests of the request parser and the reply encoder (`resp`).

use super::*;

fn parse_all(input: &[u8]) -> Result<Vec<Args>, ProtocolError> {
    let mut p = Parser::default();
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    while let Some(a) = p.next(&mut buf)? {
        out.push(a);
    }
    Ok(out)
}

use proptest::prelude::*;

/// Encodes requests as multibulks, as every client library sends them.
fn encode_multibulk(reqs: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in reqs {
        out.extend_from_slice(format!("*{}\r\n", r.len()).as_bytes());
        for a in r {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// Feeds `input` in pieces cut at `cuts` (sorted offsets), parsing after each piece as a connection does.
fn parse_split(limits: Limits, input: &[u8], cuts: &[usize]) -> Result<Vec<Args>, ProtocolError> {
    let mut p = Parser::new(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut at = 0;
    let mut ends: Vec<usize> = cuts.iter().map(|&c| c.min(input.len())).collect();
    ends.sort_unstable();
    ends.push(input.len());
    for end in ends {
        if end < at {
            continue;
        }
        buf.extend_from_slice(&input[at..end]);
        at = end;
        while let Some(a) = p.next(&mut buf)? {
            out.push(a);
        }
    }
    assert!(buf.is_empty() && !p.in_request() && p.held_bytes() == 0, "left over after complete input");
    Ok(out)
}

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => proptest::collection::vec(any::<u8>(), 200..3000),
        1 => Just(b"\r\n*1\r\n$3\r\n".to_vec()),
    ]
}

fn requests() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
    proptest::collection::vec(proptest::collection::vec(arg(), 1..6), 1..12)
}

/// A word that splits as itself: no whitespace, no quote first.
fn plain_word() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        any::<u8>().prop_filter("plain", |c| !c.is_ascii_whitespace() && !matches!(*c, b'"' | b'\'' | b'*')),
        1..20,
    )
}

/// Any bytes, written as a double-quoted inline word with escapes.
fn quote(word: &[u8]) -> Vec<u8> {
    let mut q = vec![b'"'];
    for &c in word {
        match c {
            b'"' => q.extend_from_slice(b"\\\""),
            b'\\' => q.extend_from_slice(b"\\\\"),
            b'\n' => q.extend_from_slice(b"\\n"),
            b'\r' => q.extend_from_slice(b"\\r"),
            b'\t' => q.extend_from_slice(b"\\t"),
            c if c.is_ascii_graphic() || c == b' ' => q.push(c),
            c => q.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    q.push(b'"');
    q
}

fn bytes(v: &[Vec<u8>]) -> Args {
    v.iter().map(|a| Bytes::copy_from_slice(a)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn multibulk_requests_split_anywhere_parse_back(reqs in requests(), cuts in proptest::collection::vec(any::<usize>(), 0..40)) {
        let input = encode_multibulk(&reqs);
        let cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        let got = parse_split(Limits::default(), &input, &cuts).unwrap();
        let want: Vec<Args> = reqs.iter().map(|r| bytes(r)).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn byte_at_a_time_parses_back(reqs in requests()) {
        let input = encode_multibulk(&reqs);
        let cuts: Vec<usize> = (0..input.len()).collect();
        let got = parse_split(Limits::default(), &input, &cuts).unwrap();
        prop_assert_eq!(got, reqs.iter().map(|r| bytes(r)).collect::<Vec<_>>());
    }

    #[test]
    fn inline_requests_round_trip(
        lines in proptest::collection::vec(proptest::collection::vec((plain_word(), any::<bool>(), proptest::collection::vec(any::<u8>(), 0..12)), 1..6), 1..8),
        crlf in any::<bool>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..20),
    ) {
        let mut input = Vec::new();
        let mut want = Vec::new();
        for line in &lines {
            let mut words = Vec::new();
            for (i, (plain, quoted, raw)) in line.iter().enumerate() {
                if i > 0 {
                    input.extend_from_slice(if i % 2 == 0 { b"  " } else { b" \t" });
                }
                if *quoted {
                    input.extend_from_slice(&quote(raw));
                    words.push(raw.clone());
                } else {
                    input.extend_from_slice(plain);
                    words.push(plain.clone());
                }
            }
            input.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            want.push(bytes(&words));
        }
        let cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        prop_assert_eq!(parse_split(Limits::default(), &input, &cuts).unwrap(), want);
    }

    #[test]
    fn malformed_frames_give_their_error_wherever_split(
        kind in 0usize..9,
        n in 1usize..1000,
        c in any::<u8>(),
        good in requests(),
        cuts in proptest::collection::vec(any::<usize>(), 0..10),
    ) {
        let small = Limits { max_bulk_len: 1000, max_multibulk_len: 1000, max_inline_len: 1000 };
        let (bad, want): (Vec<u8>, ProtocolError) = match kind {
            0 => (format!("*{n}x\r\n").into_bytes(), ProtocolError::MultibulkLength),
            1 => (format!("*{}\r\n", 1000 + n).into_bytes(), ProtocolError::MultibulkLength),
            2 => (format!("*1\r\n${}\r\n", 1000 + n).into_bytes(), ProtocolError::BulkLength),
            3 => (format!("*1\r\n$-{n}\r\n").into_bytes(), ProtocolError::BulkLength),
            4 => {
                let c = if c == b'$' { b'+' } else { c };
                let mut v = b"*2\r\n$1\r\na\r\n".to_vec();
                v.push(c);
                v.extend_from_slice(b"3\r\n");
                (v, ProtocolError::ExpectedDollar(c as char))
            }
            5 => {
                let mut v = format!("*1\r\n${}\r\n", n % 100).into_bytes();
                v.extend(std::iter::repeat_n(b'a', n % 100 + 1));
                v.extend_from_slice(b"\r\n");
                (v, ProtocolError::MissingCrlf)
            }
            6 => (format!("*{}", "9".repeat(MAX_HEADER + n % 50)).into_bytes(), ProtocolError::CountTooBig),
            7 => (vec![b'x'; 1001 + n], ProtocolError::InlineTooBig),
            _ => (format!("set k \"{}\n", "v".repeat(n % 20)).into_bytes(), ProtocolError::UnbalancedQuotes),
        };
        // Good requests first: they parse; then the bad frame's error, whatever the split.
        let good: Vec<Vec<Vec<u8>>> = good.into_iter().map(|r| r.into_iter().map(|a| a[..a.len().min(100)].to_vec()).collect()).collect();
        let mut input = encode_multibulk(&good);
        let good_len = good.len();
        input.extend_from_slice(&bad);
        let cuts: Vec<usize> = cuts.iter().map(|x| x % (input.len() + 1)).collect();
        let mut p = Parser::new(small);
        let mut buf = BytesMut::new();
        let mut parsed = 0;
        let mut err = None;
        let mut ends = cuts.clone();
        ends.sort_unstable();
        ends.push(input.len());
        let mut at = 0;
        'feed: for end in ends {
            buf.extend_from_slice(&input[at..end.max(at)]);
            at = end.max(at);
            loop {
                match p.next(&mut buf) {
                    Ok(Some(_)) => parsed += 1,
                    Ok(None) => break,
                    Err(e) => { err = Some(e); break 'feed; }
                }
            }
        }
        prop_assert_eq!(parsed, good_len);
        prop_assert_eq!(err, Some(want));
    }

    #[test]
    fn garbage_never_panics_and_stays_bounded(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        fuzz_requests(&data);
    }

    #[test]
    fn framed_garbage_never_panics(parts in proptest::collection::vec(prop_oneof![
        Just(b"*".to_vec()), Just(b"$".to_vec()), Just(b"\r\n".to_vec()), Just(b"\n".to_vec()),
        Just(b"-1".to_vec()), Just(b"3".to_vec()), Just(b"\"".to_vec()), Just(b"'".to_vec()),
        Just(b"\\x4".to_vec()), Just(b" ".to_vec()), Just(b"99999999999999999999".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ], 0..200), seed in any::<u8>()) {
        let mut data = vec![seed];
        data.extend(parts.concat());
        fuzz_requests(&data);
    }
}

#[test]
fn a_huge_announced_bulk_costs_nothing_until_it_arrives() {
    let mut p = Parser::default();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$536870912\r\nab"[..]);
    assert_eq!(p.next(&mut buf), Ok(None));
    assert!(buf.capacity() <= (1 << 20) + 64, "reserved {}", buf.capacity());
    assert_eq!(p.wanted(), (512 << 20) + 2);
    assert!(p.in_request());
}

#[test]
fn a_huge_announced_count_allocates_for_what_arrives() {
    let mut p = Parser::default();
    let mut buf = BytesMut::from(&b"*1048576\r\n$1\r\na\r\n"[..]);
    assert_eq!(p.next(&mut buf), Ok(None));
    assert!(p.held_bytes() < 100);
}

#[test]
fn multibulk_and_inline() {
    let got = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\nset a \"b c\\x41\"\r\n").unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], vec![Bytes::from("GET"), Bytes::from("k")]);
    assert_eq!(got[1], vec![Bytes::from("PING")]);
    assert_eq!(got[2], vec![Bytes::from("set"), Bytes::from("a"), Bytes::from("b cA")]);
}

#[test]
fn malformed_frames_are_errors() {
    assert_eq!(parse_all(b"*x\r\n"), Err(ProtocolError::MultibulkLength));
    assert_eq!(parse_all(b"*1\r\n$-5\r\n"), Err(ProtocolError::BulkLength));
    assert_eq!(parse_all(b"*1\r\n+OK\r\n"), Err(ProtocolError::ExpectedDollar('+')));
    assert_eq!(parse_all(b"*1\r\n$1\r\nabc"), Err(ProtocolError::MissingCrlf));
    assert_eq!(parse_all(b"set \"abc\r\n"), Err(ProtocolError::UnbalancedQuotes));
    assert_eq!(parse_all(b"*99999999999999999999999999999999999"), Err(ProtocolError::CountTooBig));
    assert_eq!(parse_all(b"*1\r\n$536870913\r\n"), Err(ProtocolError::BulkLength));
}

#[test]
fn doubles_print_as_redis_7_0_does() {
    let cases = [
        (1.5, "1.5"),
        (3.0, "3"),
        (-2.0, "-2"),
        (1.1, "1.1000000000000001"),
        (0.1, "0.10000000000000001"),
        (1e-5, "1.0000000000000001e-05"),
        (1e-4, "0.0001"),
        (123.456, "123.456"),
        (1e22, "1e+22"),
        (1.5e16, "15000000000000000"),
        (1e17, "1e+17"),
        (123456789012345678.0, "1.2345678901234568e+17"),
        (1e300, "1.0000000000000001e+300"),
        (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
        (5e-324, "4.9406564584124654e-324"),
        (f64::MAX, "1.7976931348623157e+308"),
        (0.30000000000000004, "0.30000000000000004"),
        (-0.0, "-0"),
        (0.0, "0"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
    ];
    for (d, want) in cases {
        assert_eq!(format_double(d), want, "{d:e}");
    }
}

#[test]
fn replies_in_both_protocols() {
    let r = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(-12)), (Reply::bulk("b"), Reply::Nil)]);
    let mut out = BytesMut::new();
    r.encode(2, &mut out);
    assert_eq!(&out[..], b"*4\r\n$1\r\na\r\n:-12\r\n$1\r\nb\r\n$-1\r\n");
    out.clear();
    r.encode(3, &mut out);
    assert_eq!(&out[..], b"%2\r\n$1\r\na\r\n:-12\r\n$1\r\nb\r\n_\r\n");
    out.clear();
    let p = Reply::Pairs(vec![(Reply::bulk("a"), Reply::Double(1.5))]);
    p.encode(2, &mut out);
    assert_eq!(&out[..], b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n");
    out.clear();
    p.encode(3, &mut out);
    assert_eq!(&out[..], b"*1\r\n*2\r\n$1\r\na\r\n,1.5\r\n");
    out.clear();
    Reply::Int(i64::MIN).encode(2, &mut out);
    assert_eq!(&out[..], b":-9223372036854775808\r\n");
}

#[test]
fn bulks_encode_as_an_array_of_bulk_strings_in_both_protocols() {
    let long = vec![b'x'; 1234];
    let elements: Vec<&[u8]> = vec![b"", b"a", b"with\r\ncrlf", b"$3\r\n", &long];
    let mut bulks = Bulks::with_capacity(0);
    assert!(bulks.is_empty());
    for e in &elements {
        bulks.push(e);
    }
    assert_eq!(bulks.len(), elements.len());
    let array = Reply::Array(elements.iter().map(|e| Reply::Bulk(Bytes::copy_from_slice(e))).collect());
    for proto in [2, 3] {
        let (mut want, mut got) = (BytesMut::new(), BytesMut::new());
        array.encode(proto, &mut want);
        Reply::Bulks(bulks.clone()).encode(proto, &mut got);
        assert_eq!(got, want, "RESP{proto}");
    }
    assert_eq!(bulks.iter().collect::<Vec<_>>(), elements);
    assert_eq!(Reply::Array(bulks.to_replies()), array);
    assert_eq!(Reply::Bulks(bulks.clone()), array, "equal to the array of the same bulk strings");
    assert_eq!(array, Reply::Bulks(bulks.clone()));
    let mut other = bulks.clone();
    other.push(b"one more");
    assert_ne!(Reply::Bulks(other), array);
    assert_ne!(Reply::Bulks(Bulks::default()), Reply::Array(vec![Reply::Int(1)]));
    let mut out = BytesMut::new();
    Reply::Bulks(Bulks::default()).encode(2, &mut out);
    assert_eq!(&out[..], b"*0\r\n");
    assert_eq!(Bulks::default().iter().count(), 0);
}
