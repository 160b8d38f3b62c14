//! Users and their permissions, as Redis 7.0's ACL has them.
//!
//! - [`Universe`]: every command and subcommand a rule can name (Redis 7.0's, then this server's own), each
//!   with an id and its ACL categories (`table.rs`: Redis's, as facts);
//! - [`User`]: flags, password hashes and selectors, built by `ACL SETUSER` rules and checked per command;
//! - [`Acl`]: the users by name, each behind a [`UserHandle`] whose [`User`] is an `Arc` swapped whole on
//!   every change, the `ACL LOG`, and the aclfile (`ACL SAVE` / `ACL LOAD`).
//!
//! Users live in memory; with `aclfile` configured they are loaded from it at start and by `ACL LOAD`, and
//! written to it by `ACL SAVE`, as in Redis. They are not stored in the engine.
//!
//! The check on the hot path: a connection holds its user's handle; when that user's root selector allows
//! everything (the `default` user of a fresh server) the check is one atomic load and a flag test, with no
//! lock and no allocation.

mod table;
pub mod user;

use crate::commands::{self, Spec};
use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub use table::CATEGORY_NAMES;
pub use user::{Denied, RuleError, User};

/// The bit of a category name (ASCII case-insensitive), as in [`CATEGORY_NAMES`].
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORY_NAMES.iter().position(|c| c.as_bytes().eq_ignore_ascii_case(name)).map(|i| 1u32 << i)
}

/// Every command a rule can name, with ids: Redis 7.0's commands and subcommands, then this server's own.
pub struct Universe {
    names: Vec<String>,
    cats: Vec<u32>,
    parent: Vec<Option<usize>>,
    subs: Vec<Vec<usize>>,
    /// The part after `|` of each subcommand's name.
    short: Vec<String>,
    index: HashMap<String, usize>,
    /// Served by this server (listed by `ACL CAT <category>`).
    served: Vec<bool>,
}

impl Universe {
    fn build() -> Universe {
        let mut u = Universe {
            names: Vec::new(),
            cats: Vec::new(),
            parent: Vec::new(),
            subs: Vec::new(),
            short: Vec::new(),
            index: HashMap::new(),
            served: Vec::new(),
        };
        let add = |u: &mut Universe, name: &str, cats: u32| {
            let id = u.names.len();
            let parent = name.split_once('|').and_then(|(p, _)| u.index.get(p).copied());
            u.names.push(name.to_string());
            u.cats.push(cats);
            u.parent.push(parent);
            u.subs.push(Vec::new());
            u.short.push(name.split_once('|').map_or(String::new(), |(_, s)| s.to_string()));
            u.index.insert(name.to_string(), id);
            if let Some(p) = parent {
                u.subs[p].push(id);
            }
            let top = name.split('|').next().unwrap_or(name);
            u.served.push(commands::lookup(top.as_bytes()).is_some());
        };
        // Sorted, so a parent comes before its subcommands.
        for (name, cats) in table::COMMAND_CATEGORIES {
            add(&mut u, name, *cats);
        }
        for spec in commands::all() {
            if !u.index.contains_key(spec.name) {
                add(&mut u, spec.name, categories_from_flags(spec));
            }
        }
        u
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn name(&self, id: usize) -> &str {
        &self.names[id]
    }

    pub fn categories(&self, id: usize) -> u32 {
        self.cats[id]
    }

    pub fn parent(&self, id: usize) -> Option<usize> {
        self.parent[id]
    }

    pub fn subs(&self, id: usize) -> &[usize] {
        &self.subs[id]
    }

    /// The commands that are not subcommands, in id order.
    pub fn top_level(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len()).filter(|&id| self.parent[id].is_none())
    }

    /// A command or `parent|sub` by name, ASCII case-insensitive.
    pub fn id(&self, name: &[u8]) -> Option<usize> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        self.index.get(&lower).copied()
    }

    /// The id a command line runs as: its subcommand's for a container command with a known subcommand,
    /// else the command's. Allocates nothing.
    pub fn command_id(&self, name: &str, args: &[Bytes]) -> Option<usize> {
        let id = *self.index.get(name)?;
        if let Some(sub) = args.get(1) {
            if let Some(&s) = self.subs[id].iter().find(|&&s| self.short[s].as_bytes().eq_ignore_ascii_case(sub)) {
                return Some(s);
            }
        }
        Some(id)
    }

    /// The names of the served commands and subcommands in a category (`ACL CAT <category>`).
    pub fn in_category(&self, cat: u32) -> Vec<&str> {
        (0..self.len()).filter(|&id| self.served[id] && self.cats[id] & cat != 0).map(|id| self.name(id)).collect()
    }

    /// The category names of a command (`COMMAND INFO`), with their `@`.
    pub fn category_names(&self, name: &str) -> Vec<String> {
        let cats = self.index.get(name).map_or(0, |&id| self.cats[id]);
        CATEGORY_NAMES.iter().enumerate().filter(|(i, _)| cats & (1 << i) != 0).map(|(_, c)| format!("@{c}")).collect()
    }
}

/// Categories for a command Redis 7.0 does not have (a ShaleDB extension), from its flags.
fn categories_from_flags(spec: &Spec) -> u32 {
    use commands::flags::*;
    let bit = |n: &str| category_bit(n.as_bytes()).unwrap_or(0);
    let mut c = 0;
    if spec.flags & WRITE != 0 || spec.is_write() {
        c |= bit("write");
    }
    if spec.flags & READONLY != 0 {
        c |= bit("read");
    }
    if spec.flags & ADMIN != 0 {
        c |= bit("admin") | bit("dangerous");
    }
    c |= if spec.flags & FAST != 0 { bit("fast") } else { bit("slow") };
    if spec.first_key > 0 {
        c |= bit("keyspace");
    }
    if spec.flags & PUBSUB != 0 {
        c |= bit("pubsub");
    }
    if spec.flags & BLOCKING != 0 {
        c |= bit("blocking");
    }
    c
}

/// The command universe, built once.
pub fn universe() -> &'static Universe {
    static U: OnceLock<Universe> = OnceLock::new();
    U.get_or_init(Universe::build)
}

/// A user as connections hold it: the name, and its current permissions swapped whole on change.
#[derive(Debug)]
pub struct UserHandle {
    pub name: String,
    user: ArcSwap<User>,
    /// Deleted (`ACL DELUSER`, or replaced by `ACL LOAD`).
    removed: AtomicBool,
}

impl UserHandle {
    fn new(user: User) -> Arc<UserHandle> {
        Arc::new(UserHandle {
            name: user.name.clone(),
            user: ArcSwap::from_pointee(user),
            removed: AtomicBool::new(false),
        })
    }

    /// The user as it is now.
    pub fn get(&self) -> Arc<User> {
        self.user.load_full()
    }

    /// The permission check of one command line: lock-free, and free of allocation for a user allowed
    /// everything.
    #[inline]
    pub fn check(&self, spec: &Spec, args: &[Bytes]) -> Result<(), Denied> {
        let u = self.user.load();
        if u.all {
            return Ok(());
        }
        u.check(spec, args)
    }

    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }
}

/// Why an entry is in the ACL log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogReason {
    Command,
    Key,
    Channel,
    Auth,
}

/// Where the refused command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogContext {
    Toplevel,
    Multi,
    Lua,
}

/// One `ACL LOG` entry (repeats within a minute are counted in one).
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    pub reason: LogReason,
    pub context: LogContext,
    pub object: Bytes,
    pub username: Bytes,
    pub created: Instant,
    pub client_info: String,
}

/// The users, the log and the aclfile.
pub struct Acl {
    users: Mutex<BTreeMap<Vec<u8>, Arc<UserHandle>>>,
    default: Arc<UserHandle>,
    log: Mutex<VecDeque<LogEntry>>,
    /// The clients logged in as another user than `default`, by client id: the commands their scripts
    /// call are checked against it (the commit step knows a job's client id only).
    clients: Mutex<HashMap<u64, Arc<UserHandle>>>,
    /// `clients` is not empty: while it is, scripts' calls skip the lookup.
    any_client: AtomicBool,
}

/// The reply text of a refused aclfile (`ACL LOAD`) or a failed read or write of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError(pub String);

impl Acl {
    /// The `default` user only, with `requirepass` as its password.
    pub fn new(requirepass: Option<&str>) -> Acl {
        let default = UserHandle::new(User::default_user(requirepass));
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), default.clone());
        Acl {
            users: Mutex::new(users),
            default,
            log: Mutex::new(VecDeque::new()),
            clients: Mutex::new(HashMap::new()),
            any_client: AtomicBool::new(false),
        }
    }

    /// The users of a starting server: the `default` user with `requirepass` as its password, or, with an
    /// `aclfile` configured, the file's users (a file that cannot be read or has errors stops the start).
    pub fn from_config(config: &crate::config::Config) -> Result<Acl, String> {
        let acl = Acl::new(config.requirepass.as_deref());
        let path = config.get("aclfile").unwrap_or_default();
        if !path.is_empty() {
            acl.load(&path).map_err(|e| format!("aclfile {path}: {}", e.0))?;
        }
        Ok(acl)
    }

    /// Client `id` now runs as `user` (AUTH): its scripts' calls are checked against that user.
    pub fn bind_client(&self, id: u64, user: &Arc<UserHandle>) {
        let mut c = self.clients.lock();
        if Arc::ptr_eq(user, &self.default) {
            c.remove(&id);
        } else {
            c.insert(id, user.clone());
        }
        self.any_client.store(!c.is_empty(), Ordering::Release);
    }

    /// Client `id` is gone, or back to `default` (RESET).
    pub fn forget_client(&self, id: u64) {
        if !self.any_client.load(Ordering::Acquire) {
            return;
        }
        let mut c = self.clients.lock();
        c.remove(&id);
        self.any_client.store(!c.is_empty(), Ordering::Release);
    }

    /// The user client `client` is logged in as.
    fn user_of(&self, client: u64) -> Arc<UserHandle> {
        if self.any_client.load(Ordering::Acquire) {
            self.clients.lock().get(&client).cloned().unwrap_or_else(|| self.default.clone())
        } else {
            self.default.clone()
        }
    }

    /// `redis.acl_check_cmd`: whether client `client` may run `words` (command, keys, channels), without an ACL
    /// LOG entry.
    pub fn allows_script(&self, client: u64, spec: &Spec, words: &[Bytes]) -> bool {
        self.user_of(client).check(spec, words).is_ok()
    }

    /// The permission check of a command a script of client `client` calls (`redis.call`): `Err` is the
    /// error text Redis gives the script; the refusal is logged (context `lua`).
    pub fn check_script(&self, client: u64, spec: &Spec, words: &[Bytes]) -> Result<(), String> {
        let user = self.user_of(client);
        let Err(denied) = user.check(spec, words) else { return Ok(()) };
        let (reason, object, why) = match denied {
            Denied::Command => {
                let u = universe();
                let name = u.command_id(spec.name, words).map_or(spec.name, |id| u.name(id));
                (LogReason::Command, Bytes::copy_from_slice(name.as_bytes()), "can't run this command or subcommand")
            }
            Denied::Key(i) => (
                LogReason::Key,
                words[i].clone(),
                "can't access at least one of the keys mentioned in the command arguments",
            ),
            Denied::Channel(i) => {
                (LogReason::Channel, words[i].clone(), "can't publish to the channel mentioned in the command")
            }
        };
        self.log(reason, LogContext::Lua, object, Bytes::from(user.name.clone()), String::new(), 128);
        Err(format!("The user executing the script {why}"))
    }

    /// The `default` user (new connections start as it).
    pub fn default_user(&self) -> Arc<UserHandle> {
        self.default.clone()
    }

    /// True when a new connection must authenticate: the default user needs a password or is off.
    pub fn auth_required(&self) -> bool {
        let d = self.default.user.load();
        !d.nopass || !d.enabled
    }

    /// `CONFIG SET requirepass`: the default user's passwords become this one (`None`: `nopass`).
    pub fn set_requirepass(&self, pass: Option<&str>) {
        let mut u = (*self.default.get()).clone();
        let _ = u.apply(b"resetpass");
        match pass {
            Some(p) => {
                let _ = u.apply(format!(">{p}").as_bytes());
            }
            None => {
                let _ = u.apply(b"nopass");
            }
        }
        self.default.user.store(Arc::new(u));
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<UserHandle>> {
        self.users.lock().get(name).cloned()
    }

    /// Every user, by name.
    pub fn users(&self) -> Vec<Arc<UserHandle>> {
        self.users.lock().values().cloned().collect()
    }

    /// The user `name` if `pass` opens it.
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> Option<Arc<UserHandle>> {
        let h = self.get(name)?;
        h.get().password_ok(pass).then_some(h)
    }

    /// `ACL SETUSER name rules...`: all rules or none; `Err` is the reply text.
    pub fn set_user(&self, name: &[u8], rules: &[Bytes]) -> Result<(), String> {
        let merged = user::merge_selectors(rules).map_err(|i| {
            format!("Unmatched parenthesis in acl selector starting at '{}'.", String::from_utf8_lossy(&rules[i]))
        })?;
        let mut users = self.users.lock();
        let existing = users.get(name).cloned();
        let mut u = match &existing {
            Some(h) => (*h.get()).clone(),
            None => User::new(&String::from_utf8_lossy(name)),
        };
        for op in &merged {
            u.apply(op).map_err(|e| {
                format!("Error in ACL SETUSER modifier '{}': {}", String::from_utf8_lossy(op), e.message())
            })?;
        }
        match existing {
            Some(h) => h.user.store(Arc::new(u)),
            None => {
                users.insert(name.to_vec(), UserHandle::new(u));
            }
        }
        Ok(())
    }

    /// `ACL DELUSER`: the handles removed (their clients are to be disconnected).
    pub fn delete(&self, names: &[Bytes]) -> Vec<Arc<UserHandle>> {
        let mut users = self.users.lock();
        let mut gone = Vec::new();
        for n in names {
            if let Some(h) = users.remove(&n[..]) {
                h.removed.store(true, Ordering::Release);
                gone.push(h);
            }
        }
        gone
    }

    /// Records a refusal in the ACL log (`max`: `acllog-max-len`).
    pub fn log(
        &self,
        reason: LogReason,
        context: LogContext,
        object: Bytes,
        username: Bytes,
        client_info: String,
        max: usize,
    ) {
        let mut log = self.log.lock();
        let now = Instant::now();
        if let Some(e) = log.iter_mut().find(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now.duration_since(e.created) <= Duration::from_secs(60)
        }) {
            e.count += 1;
            e.created = now;
            e.client_info = client_info;
            return;
        }
        log.push_front(LogEntry { count: 1, reason, context, object, username, created: now, client_info });
        log.truncate(max);
    }

    /// The newest `count` log entries.
    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.log.lock().iter().take(count).cloned().collect()
    }

    pub fn log_reset(&self) {
        self.log.lock().clear();
    }

    /// `ACL SAVE`: every user, one `user <name> <rules>` line each, written to a temporary file, synced,
    /// and renamed over `path`.
    pub fn save(&self, path: &str) -> std::io::Result<()> {
        use std::io::Write;
        let mut text = String::new();
        for h in self.users() {
            text.push_str(&format!("user {} {}\n", h.name, h.get().describe()));
        }
        let tmp = format!("{path}.tmp-{}", std::process::id());
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    /// `ACL LOAD` (and the start with an aclfile): the file's users replace every user, or nothing changes.
    /// The handles replaced (their clients are to be disconnected) on success.
    pub fn load(&self, path: &str) -> Result<Vec<Arc<UserHandle>>, FileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| FileError(format!("Error loading ACLs, opening file '{path}': {e}")))?;
        let parsed = parse_file(path, &text)?;
        let mut users = self.users.lock();
        let mut gone = Vec::new();
        let mut next = BTreeMap::new();
        let mut default_seen = false;
        for u in parsed {
            if u.name == "default" {
                self.default.user.store(Arc::new(u));
                default_seen = true;
                continue;
            }
            next.insert(u.name.as_bytes().to_vec(), UserHandle::new(u));
        }
        if !default_seen {
            self.default.user.store(Arc::new(User::default_user(None)));
        }
        next.insert(b"default".to_vec(), self.default.clone());
        for (name, h) in std::mem::take(&mut *users) {
            if name != b"default" {
                h.removed.store(true, Ordering::Release);
                gone.push(h);
            }
        }
        *users = next;
        Ok(gone)
    }
}

/// The users of an aclfile: `user <name> <rule> ...` lines, blank lines and `#` comments skipped. Every
/// error is reported, each with its line.
fn parse_file(path: &str, text: &str) -> Result<Vec<User>, FileError> {
    let mut errors = String::new();
    let mut users: Vec<User> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let lineno = n + 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<Bytes> = line.split_ascii_whitespace().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
        if words.first().map(|w| &w[..]) != Some(b"user") || words.len() < 2 {
            errors.push_str(&format!("{path}:{lineno} should start with user keyword. "));
            continue;
        }
        let name = String::from_utf8_lossy(&words[1]).into_owned();
        if users.iter().any(|u| u.name == name) {
            errors.push_str(&format!("{path}:{lineno}: Duplicate user '{name}' found. "));
            continue;
        }
        let merged = match user::merge_selectors(&words[2..]) {
            Ok(m) => m,
            Err(i) => {
                errors.push_str(&format!(
                    "{path}:{lineno}: Unmatched parenthesis in acl selector starting at '{}'. ",
                    String::from_utf8_lossy(&words[2 + i])
                ));
                continue;
            }
        };
        let mut u = User::new(&name);
        let mut ok = true;
        for op in &merged {
            if let Err(e) = u.apply(op) {
                errors.push_str(&format!("{path}:{lineno}: {}. ", e.message()));
                ok = false;
                break;
            }
        }
        if ok {
            users.push(u);
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str("WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
        Err(FileError(errors))
    }
}

#[cfg(test)]
mod tests;
