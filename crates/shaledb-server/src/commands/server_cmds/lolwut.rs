//! LOLWUT: the server's version line.
//!
//! Redis 7.0 answers `Redis ver. <version>` for its own version and for every `VERSION n` but 5 and 6, for
//! which it draws generative art instead; this server answers the version line for those too (it draws
//! none).

use crate::commands::arg_i64;
use crate::resp::{Args, Reply};
use crate::server::{Session, Shared};

/// `LOLWUT [VERSION version] [argument ...]`.
pub fn lolwut(_: &mut Session, _: &Shared, args: &Args) -> Reply {
    if args.len() >= 3 && args[1].eq_ignore_ascii_case(b"version") {
        if let Err(e) = arg_i64(&args[2]) {
            return e;
        }
    }
    Reply::Verbatim(format!("Redis ver. {}\n", crate::REDIS_VERSION))
}
