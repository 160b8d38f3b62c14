//! One user: its flags, password hashes and selectors (the root one and those in parentheses), the rules
//! of `ACL SETUSER` that change them, the text `ACL LIST` and `ACL GETUSER` describe them with, and the
//! permission check of a command line.

use super::{universe, Universe};
use crate::commands::server_cmds::glob_match;
use crate::commands::{flags, Spec};
use bytes::Bytes;

/// Read and write permission of a key pattern (`%R~`, `%W~`, `~` is both).
const READ: u8 = 1;
const WRITE: u8 = 2;

/// What a selector allows: commands (a bit per command id of the [`Universe`]), keys and channels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    bits: Vec<u64>,
    /// Set by `+@all` only, cleared by `-@all`: the rules start from `+@all` when described.
    future: bool,
    /// Every command is allowed (cleared by any command being denied).
    allcommands: bool,
    /// `+select|0`: first arguments allowed of an otherwise denied command, by command id.
    first_args: Vec<(usize, Vec<Vec<u8>>)>,
    allkeys: bool,
    keys: Vec<(u8, Vec<u8>)>,
    allchannels: bool,
    channels: Vec<Vec<u8>>,
}

/// Why a rule was refused; [`RuleError::message`] is Redis's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    UnknownName,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl RuleError {
    pub fn message(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownName => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any \
                 effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have \
                 any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// Why a command line is refused, in Redis's order of relevance (a later kind wins between selectors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command,
    /// The argument index of the key.
    Key(usize),
    /// The argument index of the channel.
    Channel(usize),
}

impl Denied {
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }
}

/// C's `isspace` (Redis's test for a space in a pattern or name): also `\v`, which Rust's
/// `is_ascii_whitespace` leaves out.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| is_c_space(c) || c == 0)
}

/// The rules inside a `(...)` selector, split as Redis splits them (its `sdssplitargs`): runs of spaces
/// separate them; `"..."` (with `\n \r \t \b \a \xHH` and `\<c>` escapes) and `'...'` (with `\'`) quote
/// parts of a rule, and a closing quote must end the rule. Unbalanced quotes give no rule at all (Redis
/// then makes an empty selector). The text ends at its first NUL byte, as a C string does.
pub fn split_selector_rules(inner: &[u8]) -> Vec<Vec<u8>> {
    let s = inner.split(|&c| c == 0).next().unwrap_or_default();
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while at(i) != 0 && is_c_space(at(i)) {
            i += 1;
        }
        if at(i) == 0 {
            return out;
        }
        let (mut dq, mut sq) = (false, false);
        let mut rule = Vec::new();
        loop {
            let c = at(i);
            if dq {
                if c == b'\\' && at(i + 1) == b'x' && at(i + 2).is_ascii_hexdigit() && at(i + 3).is_ascii_hexdigit() {
                    let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                    rule.push(hex(at(i + 2)) * 16 + hex(at(i + 3)));
                    i += 3;
                } else if c == b'\\' && at(i + 1) != 0 {
                    i += 1;
                    rule.push(match at(i) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(i + 1) != 0 && !is_c_space(at(i + 1)) {
                        return Vec::new();
                    }
                    i += 1;
                    break;
                } else if c == 0 {
                    return Vec::new();
                } else {
                    rule.push(c);
                }
            } else if sq {
                if c == b'\\' && at(i + 1) == b'\'' {
                    i += 1;
                    rule.push(b'\'');
                } else if c == b'\'' {
                    if at(i + 1) != 0 && !is_c_space(at(i + 1)) {
                        return Vec::new();
                    }
                    i += 1;
                    break;
                } else if c == 0 {
                    return Vec::new();
                } else {
                    rule.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => dq = true,
                    b'\'' => sq = true,
                    other => rule.push(other),
                }
            }
            i += 1;
        }
        out.push(rule);
    }
}

impl Selector {
    /// A selector that allows nothing (a new user's, or a new `(...)` one's).
    pub fn empty(u: &Universe) -> Selector {
        Selector {
            bits: vec![0; u.len().div_ceil(64)],
            future: false,
            allcommands: false,
            first_args: Vec::new(),
            allkeys: false,
            keys: Vec::new(),
            allchannels: false,
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.bits.get(id / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if let Some(w) = self.bits.get_mut(id / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
                self.allcommands = false;
            }
        }
    }

    /// Allows or denies a command and, for a container, every subcommand.
    fn change(&mut self, u: &Universe, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.first_args.retain(|(c, _)| *c != id);
        for &sub in u.subs(id) {
            self.set_bit(sub, allow);
        }
    }

    fn change_category(&mut self, u: &Universe, cat: u32, allow: bool) {
        for id in 0..u.len() {
            if u.categories(id) & cat != 0 {
                self.change(u, id, allow);
            }
        }
    }

    fn set_all(&mut self, allow: bool) {
        let fill = if allow { u64::MAX } else { 0 };
        self.bits.iter_mut().for_each(|w| *w = fill);
        self.future = allow;
        self.allcommands = allow;
        self.first_args.clear();
    }

    /// Applies one selector rule (`~pattern`, `+cmd`, `-@cat`, `allkeys` ...).
    pub fn apply(&mut self, u: &Universe, op: &[u8]) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.allkeys {
                return Err(RuleError::KeyAfterAll);
            }
            let (perm, pattern) = if op[0] == b'%' {
                let mut perm = 0u8;
                let mut at = 1;
                loop {
                    match op.get(at).map(u8::to_ascii_uppercase) {
                        Some(b'R') if perm & READ == 0 => perm |= READ,
                        Some(b'W') if perm & WRITE == 0 => perm |= WRITE,
                        Some(b'~') => {
                            at += 1;
                            break;
                        }
                        _ => return Err(RuleError::Syntax),
                    }
                    at += 1;
                }
                (perm, &op[at..])
            } else {
                (READ | WRITE, &op[1..])
            };
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|(_, p)| p == pattern) {
                Some((f, _)) => *f |= perm,
                None => self.keys.push((perm, pattern.to_vec())),
            }
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|p| p == pattern) {
                self.channels.push(pattern.to_vec());
            }
        } else if op.len() > 1 && (op[0] == b'+' || op[0] == b'-') && op[1] == b'@' {
            let cat = super::category_bit(&op[2..]).ok_or(RuleError::UnknownName)?;
            self.change_category(u, cat, op[0] == b'+');
        } else if op[0] == b'+' {
            let name = &op[1..];
            match name.iter().rposition(|&c| c == b'|') {
                None => self.change(u, u.id(name).ok_or(RuleError::UnknownName)?, true),
                Some(bar) => {
                    let parent = u.id(&name[..bar]).ok_or(RuleError::UnknownName)?;
                    if u.parent(parent).is_some() {
                        return Err(RuleError::FirstArgOfSubcommand);
                    }
                    let first = &name[bar + 1..];
                    if first.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !u.subs(parent).is_empty() {
                        self.change(u, u.id(name).ok_or(RuleError::UnknownName)?, true);
                    } else if !self.bit(parent) {
                        let first = first.to_ascii_lowercase();
                        match self.first_args.iter_mut().find(|(c, _)| *c == parent) {
                            Some((_, list)) if list.contains(&first) => {}
                            Some((_, list)) => list.push(first),
                            None => self.first_args.push((parent, vec![first])),
                        }
                    }
                }
            }
        } else if op[0] == b'-' {
            self.change(u, u.id(&op[1..]).ok_or(RuleError::UnknownName)?, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// Whether a subscription to `name` (a pattern when `is_pattern`: it must be allowed as written) is
    /// allowed.
    fn channel_allowed(&self, name: &[u8], is_pattern: bool) -> bool {
        self.allchannels
            || self.channels.iter().any(|p| if is_pattern { p[..] == name[..] } else { glob_match(p, name, false) })
    }

    /// True when every command, key and channel is allowed.
    fn allows_everything(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }

    /// The command rules as `ACL LIST` shows them: `+@all` or `-@all`, then the categories that fit best,
    /// then single commands, as Redis builds them (so the text reads back to the same permissions).
    pub fn describe_commands(&self, u: &Universe) -> String {
        let mut out = String::new();
        let additive = !self.future;
        let mut fake = Selector::empty(u);
        if additive {
            out.push_str("-@all ");
        } else {
            out.push_str("+@all ");
            fake.set_all(true);
        }
        let mut temp = self.clone();
        let mut applied = [false; super::CATEGORY_NAMES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0usize);
            for (j, done) in applied.iter().enumerate() {
                if *done {
                    continue;
                }
                let cat = 1u32 << j;
                let (mut on, mut off) = (0usize, 0usize);
                for id in 0..u.len() {
                    if u.categories(id) & cat != 0 {
                        if temp.bit(id) {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let cat = 1u32 << j;
            fake.change_category(u, cat, additive);
            temp.change_category(u, cat, !additive);
            out.push_str(if additive { "+@" } else { "-@" });
            out.push_str(super::CATEGORY_NAMES[j]);
            out.push(' ');
            applied[j] = true;
        }
        for top in u.top_level() {
            self.describe_single(u, &mut fake, top, &mut out);
            for &sub in u.subs(top) {
                self.describe_single(u, &mut fake, sub, &mut out);
            }
        }
        out.pop();
        out
    }

    fn describe_single(&self, u: &Universe, fake: &mut Selector, id: usize, out: &mut String) {
        let mine = self.bit(id);
        if mine != fake.bit(id) {
            out.push(if mine { '+' } else { '-' });
            out.push_str(u.name(id));
            out.push(' ');
            fake.change(u, id, mine);
        }
        if !mine {
            if let Some((_, firsts)) = self.first_args.iter().find(|(c, _)| *c == id) {
                for f in firsts {
                    out.push('+');
                    out.push_str(u.name(id));
                    out.push('|');
                    out.push_str(&String::from_utf8_lossy(f));
                    out.push(' ');
                }
            }
        }
    }

    /// The key patterns, space separated (`~*` for allkeys).
    pub fn describe_keys(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let parts: Vec<String> = self
            .keys
            .iter()
            .map(|(perm, p)| {
                let prefix = match *perm {
                    READ => "%R~",
                    WRITE => "%W~",
                    _ => "~",
                };
                format!("{prefix}{}", String::from_utf8_lossy(p))
            })
            .collect();
        parts.join(" ")
    }

    /// The channel patterns, space separated (`&*` for allchannels).
    pub fn describe_channels(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let parts: Vec<String> = self.channels.iter().map(|p| format!("&{}", String::from_utf8_lossy(p))).collect();
        parts.join(" ")
    }

    /// The selector as `ACL LIST` writes it: keys, channels, commands.
    pub fn describe(&self, u: &Universe) -> String {
        let mut out = String::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            out.push_str(&keys);
            out.push(' ');
        }
        if self.allchannels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                out.push('&');
                out.push_str(&String::from_utf8_lossy(c));
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands(u));
        out
    }

    /// Whether this selector allows the command line.
    pub fn check(&self, u: &Universe, spec: &Spec, args: &[Bytes]) -> Result<(), Denied> {
        if !self.allcommands && spec.flags & flags::NO_AUTH == 0 {
            let id = u.command_id(spec.name, args);
            let ok = match id {
                Some(id) => {
                    self.bit(id)
                        || args.get(1).is_some_and(|a| {
                            self.first_args
                                .iter()
                                .any(|(c, list)| *c == id && list.iter().any(|f| f.eq_ignore_ascii_case(a)))
                        })
                }
                None => false,
            };
            if !ok {
                return Err(Denied::Command);
            }
        }
        if !self.allkeys {
            if let Ok(keys) = crate::commands::server_cmds::keyspecs::find(spec, args) {
                for (i, si) in keys {
                    let Some(key) = args.get(i) else { continue };
                    let kf = crate::commands::server_cmds::keyspecs::key_flags(spec, args, si);
                    // Shard channels are in key specs too, marked not_key: checked as channels.
                    if kf.contains(&"not_key") {
                        continue;
                    }
                    let mut need = 0u8;
                    if kf.contains(&"access") {
                        need |= READ;
                    }
                    if kf.iter().any(|f| matches!(*f, "insert" | "delete" | "update")) {
                        need |= WRITE;
                    }
                    if !self.keys.iter().any(|(perm, p)| perm & need == need && glob_match(p, key, false)) {
                        return Err(Denied::Key(i));
                    }
                }
            }
        }
        if !self.allchannels {
            let literal = |c: &[u8]| self.channels.iter().any(|p| glob_match(p, c, false));
            match spec.name {
                "publish" | "spublish" => {
                    if let Some(c) = args.get(1) {
                        if !literal(c) {
                            return Err(Denied::Channel(1));
                        }
                    }
                }
                "subscribe" | "ssubscribe" => {
                    if let Some(i) = (1..args.len()).find(|&i| !literal(&args[i])) {
                        return Err(Denied::Channel(i));
                    }
                }
                "psubscribe" => {
                    if let Some(i) = (1..args.len()).find(|&i| !self.channels.iter().any(|p| p[..] == args[i][..])) {
                        return Err(Denied::Channel(i));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A user: what `ACL SETUSER` builds and `ACL GETUSER` shows. Immutable once published (a change builds a
/// new one, swapped in whole).
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (`Some(true)`) or `skip-sanitize-payload` (`Some(false)`): shown, nothing more.
    sanitize: Option<bool>,
    /// SHA-256 of each password, in lower-case hex.
    pub passwords: Vec<String>,
    pub root: Selector,
    pub selectors: Vec<Selector>,
    /// The root selector allows every command, key and channel: the check is skipped.
    pub all: bool,
}

/// Lower-case hex SHA-256, how passwords are kept.
pub fn hash_password(p: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(p);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

impl User {
    /// A new user: off, no password, no permissions.
    pub fn new(name: &str) -> User {
        let u = universe();
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            root: Selector::empty(u),
            selectors: Vec::new(),
            all: false,
        }
    }

    /// The `default` user of a fresh server: on, every command, key and channel; `nopass` unless
    /// `requirepass` gives it a password.
    pub fn default_user(requirepass: Option<&str>) -> User {
        let mut d = User::new("default");
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = d.apply(op.as_bytes());
        }
        if let Some(p) = requirepass {
            let _ = d.apply(b"resetpass");
            let _ = d.apply(format!(">{p}").as_bytes());
        }
        d
    }

    /// Applies one `ACL SETUSER` rule.
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let r = self.apply_inner(op);
        self.all = self.root.allows_everything();
        r
    }

    fn apply_inner(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        let u = universe();
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            let at = self.passwords.iter().position(|p| *p == hash).ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::empty(u);
            let inner = &op[1..op.len() - 1];
            for rule in split_selector_rules(inner) {
                s.apply(u, &rule)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.clear();
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            self.root.apply(u, b"resetkeys")?;
            self.root.apply(u, b"resetchannels")?;
            self.enabled = false;
            self.sanitize = Some(true);
            self.selectors.clear();
            self.root.apply(u, b"-@all")?;
        } else {
            self.root.apply(u, op)?;
        }
        Ok(())
    }

    /// The flags `ACL GETUSER` lists, in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(false) => f.push("skip-sanitize-payload"),
            Some(true) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// The user's rules as `ACL LIST` and the aclfile write them (without `user <name> `).
    pub fn describe(&self) -> String {
        let u = universe();
        let mut out = String::new();
        for f in self.flag_names() {
            out.push_str(f);
            out.push(' ');
        }
        for p in &self.passwords {
            out.push('#');
            out.push_str(p);
            out.push(' ');
        }
        out.push_str(&self.root.describe(u));
        for s in &self.selectors {
            out.push_str(" (");
            out.push_str(&s.describe(u));
            out.push(')');
        }
        out
    }

    /// Whether any selector allows a subscription to `name` (a pattern only as written).
    pub fn channel_allowed(&self, name: &[u8], is_pattern: bool) -> bool {
        std::iter::once(&self.root).chain(&self.selectors).any(|s| s.channel_allowed(name, is_pattern))
    }

    /// Whether `pass` opens this user (an enabled user with `nopass`, or one of its passwords).
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = hash_password(pass);
        // Every stored hash is compared in full, so the time does not tell which one matched.
        self.passwords.iter().fold(false, |found, p| found | constant_time_eq(p.as_bytes(), h.as_bytes()))
    }

    /// Whether the user may run the command line: the root selector, then each other one; the error is the
    /// most relevant of theirs when none allows it.
    pub fn check(&self, spec: &Spec, args: &[Bytes]) -> Result<(), Denied> {
        if self.all {
            return Ok(());
        }
        let u = universe();
        let mut worst = match self.root.check(u, spec, args) {
            Ok(()) => return Ok(()),
            Err(d) => d,
        };
        for s in &self.selectors {
            match s.check(u, spec, args) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > worst.rank() => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// `ACL SETUSER`'s arguments with each `(` ... `)` selector spread over several arguments joined back into
/// one (`Err(i)`: the selector opened at argument `i` is never closed).
pub fn merge_selectors(args: &[Bytes]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, a) in args.iter().enumerate() {
        // An argument that opens a selector starts it afresh, even inside one left open (as Redis does).
        if a.first() == Some(&b'(') && a.last() != Some(&b')') {
            open = Some((i, a.to_vec()));
            continue;
        }
        if let Some((_, acc)) = open.as_mut() {
            acc.push(b' ');
            acc.extend_from_slice(a);
            if a.last() == Some(&b')') {
                out.push(open.take().map(|(_, acc)| acc).unwrap_or_default());
            }
            continue;
        }
        out.push(a.to_vec());
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(out),
    }
}
