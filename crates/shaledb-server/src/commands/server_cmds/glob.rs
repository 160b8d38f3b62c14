//! Redis's glob patterns (CONFIG GET, COMMAND LIST FILTERBY PATTERN, KEYS, SCAN MATCH, PSUBSCRIBE): the one glob
//! matcher of the server.

/// Redis's glob: `*`, `?`, `[abc]`, `[^a-z]`, `\x`. Iterative with one backtracking point per `*`, so the
/// time is bounded by pattern length x string length.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        let mut matched = None;
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => matched = Some(p + 1),
                b'[' => {
                    let (ok, next) = class_match(pattern, p + 1, s[i], nocase);
                    if ok {
                        matched = Some(next);
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if eq(pattern[p + 1], s[i]) {
                        matched = Some(p + 2);
                    }
                }
                c => {
                    if eq(c, s[i]) {
                        matched = Some(p + 1);
                    }
                }
            }
        }
        match (matched, star) {
            (Some(next), _) => {
                p = next;
                i += 1;
            }
            (None, Some((sp, si))) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting after `[` at `p`; returns whether it matched and the index after `]`.
fn class_match(pattern: &[u8], mut p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let fold = |x: u8| if nocase { x.to_ascii_lowercase() } else { x };
    let c = fold(c);
    let not = pattern.get(p) == Some(&b'^');
    if not {
        p += 1;
    }
    let mut hit = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            hit |= fold(pattern[p + 1]) == c;
            p += 2;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (mut lo, mut hi) = (fold(pattern[p]), fold(pattern[p + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            hit |= (lo..=hi).contains(&c);
            p += 3;
        } else {
            hit |= fold(pattern[p]) == c;
            p += 1;
        }
    }
    // An unterminated class ends at the end of the pattern, as in Redis.
    (hit != not, (p + 1).min(pattern.len()))
}
