//! String commands: GET, SET.

use super::flags::*;
use super::{Handler, Spec};
use crate::keys::{self, Type};
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};

pub static COMMANDS: &[Spec] = &[
    Spec {
        name: "get",
        arity: 2,
        flags: READONLY | FAST,
        first_key: 1,
        last_key: 1,
        step: 1,
        handler: Handler::Read(get),
        summary: "Returns the string value of a key.",
    },
    Spec {
        name: "set",
        arity: -3,
        flags: WRITE | DENYOOM,
        first_key: 1,
        last_key: 1,
        step: 1,
        handler: Handler::Write(set),
        summary: "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
    },
];

fn get(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    match ctx.get_meta(&args[1]) {
        Ok(None) => Reply::Nil,
        Ok(Some((m, v))) if m.typ == Type::String => Reply::Bulk(keys::payload(v, &m)),
        Ok(Some(_)) => super::wrong_type(),
        Err(e) => e,
    }
}

fn set(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    if args.len() != 3 {
        return super::syntax_error();
    }
    let mut k = std::mem::take(&mut ctx.key_buf);
    keys::meta_key_into(ctx.db_index, &args[1], &mut k);
    ctx.put_raw(&k, &keys::encode_string(&args[2], None));
    ctx.key_buf = k;
    Reply::Ok
}
