//! A [`Value`] read from the engine (DUMP) and written to it (RESTORE), through each type's own storage
//! functions.

use super::{Error, GroupValue, Pending, StreamValue, Value};
use crate::keys::{self, Coll, Type};
use crate::store::{check_entry_size, ReadCtx, WriteCtx};
use crate::types::stream::groups;
use crate::types::stream::{self, Header, Id};
use crate::types::{coll, hash, list, set, string, zset};
use bytes::Bytes;

/// The value of `key` (without its expiry, which a payload does not carry), `None` when missing.
pub fn read(ctx: &ReadCtx<'_>, key: &[u8]) -> Result<Option<Value>, Error> {
    let ctx = ctx.pinned();
    let Some((meta, stored)) = ctx.get_meta(key)? else { return Ok(None) };
    if meta.typ == Type::String {
        return Ok(Some(Value::String(keys::payload(stored, &meta).to_vec())));
    }
    let c = match Coll::decode(&stored) {
        Ok(Some(c)) => c,
        Ok(None) => return Err(crate::store::Error::WrongType.into()),
        Err(e) => return Err(crate::store::Error::Corrupt(e.to_string()).into()),
    };
    let v = match c.typ {
        Type::String => return Err(crate::store::Error::WrongType.into()),
        Type::Hash => Value::Hash(coll::all_members(&ctx, &c, keys::SUB_MEMBER)?),
        Type::List => {
            let mut items = Vec::with_capacity(c.size.min(1 << 20) as usize);
            list::for_each_in(&ctx, &c, 0, c.size, |v| items.push(v.to_vec()))?;
            Value::List(items)
        }
        Type::Set => Value::Set(set::members(&ctx, &c)?),
        Type::ZSet => Value::ZSet(zset::range::all_items(&ctx, &c)?),
        Type::Stream => Value::Stream(Box::new(read_stream(&ctx, &c)?)),
    };
    Ok(Some(v))
}

fn read_stream(ctx: &ReadCtx<'_>, c: &Coll) -> Result<StreamValue, Error> {
    let h = Header::of(c);
    let entries = stream::range(ctx, c, Id::default(), Id::MAX, false, None)?;
    let mut out = Vec::new();
    for g in groups::groups(ctx, c)? {
        let mut pending = Vec::new();
        groups::for_pending(ctx, c, &g.name, Id::default(), Id::MAX, |n| {
            pending.push(Pending {
                id: n.id,
                delivered_ms: n.delivered_ms,
                deliveries: n.deliveries,
                consumer: n.consumer.to_vec(),
            });
            true
        })?;
        let consumers = groups::consumers(ctx, c, &g.name)?.into_iter().map(|k| (k.name.to_vec(), k.seen_ms)).collect();
        out.push(GroupValue { name: g.name.to_vec(), last: g.last, entries_read: g.entries_read, pending, consumers });
    }
    Ok(StreamValue { entries, last: h.last, max_deleted: h.max_deleted, entries_added: h.entries_added, groups: out })
}

/// Refuses, before anything is written, a value the engine could not hold (so RESTORE writes all of it or
/// nothing; [`restore`] checks again).
pub fn check_sizes(key: &[u8], v: &Value) -> Result<(), Error> {
    match v {
        Value::String(s) => string::check_size(key, s)?,
        Value::List(items) => {
            coll::check_key(key)?;
            for it in items {
                check_entry_size(8 + 9, it.len())?;
            }
        }
        Value::Set(ms) => {
            coll::check_key(key)?;
            for m in ms {
                set::check_member(m)?;
            }
        }
        Value::ZSet(items) => {
            coll::check_key(key)?;
            for (m, _) in items {
                zset::check_member(m)?;
            }
        }
        Value::Hash(pairs) => {
            coll::check_key(key)?;
            for (f, v) in pairs {
                check_entry_size(f.len() + 9, v.len())?;
            }
        }
        Value::Stream(s) => {
            coll::check_key(key)?;
            for e in &s.entries {
                let size = 12 + e.pairs.iter().map(|p| p.len() + 4).sum::<usize>();
                check_entry_size(16 + 9, size)?;
            }
            for g in &s.groups {
                check_entry_size(g.name.len() + 9, 24)?;
                for (name, _) in &g.consumers {
                    check_entry_size(4 + g.name.len() + name.len() + 9 + 16, 8)?;
                }
            }
        }
    }
    Ok(())
}

/// Stores `v` as `key` with `expire_at_ms`. REQUIRES: `key` is absent (RESTORE removed it) and the expiry,
/// if any, is in the future.
pub fn restore(ctx: &mut WriteCtx<'_>, key: &[u8], v: &Value, expire_at_ms: Option<u64>) -> Result<(), Error> {
    check_sizes(key, v)?;
    let typ = match v {
        Value::String(s) => {
            string::put(ctx, key, s, expire_at_ms)?;
            return Ok(());
        }
        Value::List(items) => {
            let items: Vec<Bytes> = items.iter().map(|i| Bytes::copy_from_slice(i)).collect();
            list::push(ctx, key, &items, false, false)?;
            Type::List
        }
        Value::Set(ms) => {
            set::store(ctx, key, ms)?;
            Type::Set
        }
        Value::ZSet(items) => {
            zset::store(ctx, key, items)?;
            Type::ZSet
        }
        Value::Hash(pairs) => {
            let flat: Vec<Bytes> =
                pairs.iter().flat_map(|(f, v)| [Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)]).collect();
            hash::set_fields(ctx, key, &flat, false)?;
            Type::Hash
        }
        Value::Stream(s) => {
            restore_stream(ctx, key, s, expire_at_ms)?;
            return Ok(());
        }
    };
    if let Some(t) = expire_at_ms {
        let mut c = ctx
            .get_coll(key, typ)?
            .ok_or_else(|| crate::store::Error::Corrupt("a restored collection is missing".into()))?;
        c.expire_at_ms = Some(t);
        ctx.put_coll(key, &c)?;
    }
    Ok(())
}

fn restore_stream(ctx: &mut WriteCtx<'_>, key: &[u8], s: &StreamValue, expire: Option<u64>) -> Result<(), Error> {
    let c = stream::restore(ctx, key, &s.entries, s.last, s.max_deleted, s.entries_added, expire)?;
    for g in &s.groups {
        let group = groups::Group { name: Bytes::copy_from_slice(&g.name), last: g.last, entries_read: g.entries_read };
        groups::put_group(ctx, &c, &group)?;
        for (name, _seen) in &g.consumers {
            groups::touch_consumer(ctx, &c, &g.name, name)?;
        }
        for p in &g.pending {
            let n = groups::Nack {
                id: p.id,
                consumer: Bytes::copy_from_slice(&p.consumer),
                delivered_ms: p.delivered_ms,
                deliveries: p.deliveries,
            };
            groups::put_nack(ctx, &c, &g.name, &n, None)?;
        }
    }
    Ok(())
}
