//! GEO commands on sorted sets: GEOADD, GEODIST, GEOHASH, GEOPOS, GEOSEARCH, GEOSEARCHSTORE, GEORADIUS,
//! GEORADIUSBYMEMBER and their `_RO` forms.
//!
//! These parse the arguments in Redis 7.0's order (so the same error comes first) and build Redis's replies;
//! the geohash scores, the boxes a search scans and the distances are [`crate::types::geo`], the sorted set
//! itself [`crate::types::zset`]. GEORADIUS and GEORADIUSBYMEMBER may STORE, so they run in the commit step
//! like GEOSEARCHSTORE, reading the source through the group's view.

use super::{arg_i64, syntax_error, Spec};
use crate::keys::Coll;
use crate::resp::{Args, Reply};
use crate::store::{ReadCtx, WriteCtx};
use crate::types::geo::{self, Found, Search, Shape};
use crate::types::zset::{self, AddFlags, Added};
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[Spec] = &[
    cmd! { "geoadd", -5, WRITE | DENYOOM, [1, 1, 1], Write(geoadd), "Adds one or more members to a geospatial index. The key is created if it doesn't exist." },
    cmd! { "geodist", -4, READONLY, [1, 1, 1], Read(geodist), "Returns the distance between two members of a geospatial index." },
    cmd! { "geohash", -2, READONLY, [1, 1, 1], Read(geohash), "Returns members from a geospatial index as geohash strings." },
    cmd! { "geopos", -2, READONLY, [1, 1, 1], Read(geopos), "Returns the longitude and latitude of members from a geospatial index." },
    cmd! { "georadius", -6, WRITE | DENYOOM, [1, 1, 1], Write(georadius), "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result." },
    cmd! { "georadius_ro", -6, READONLY, [1, 1, 1], Read(georadius_ro), "Returns members from a geospatial index that are within a distance from a coordinate." },
    cmd! { "georadiusbymember", -5, WRITE | DENYOOM, [1, 1, 1], Write(georadiusbymember), "Queries a geospatial index for members within a distance from a member, optionally stores the result." },
    cmd! { "georadiusbymember_ro", -5, READONLY, [1, 1, 1], Read(georadiusbymember_ro), "Returns members from a geospatial index that are within a distance from a member." },
    cmd! { "geosearch", -7, READONLY, [1, 1, 1], Read(geosearch), "Queries a geospatial index for members inside an area of a box or a circle." },
    cmd! { "geosearchstore", -8, WRITE | DENYOOM, [1, 2, 1], Write(geosearchstore), "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result." },
];

// ---------------------------------------------------------------------------------------------------------
// Arguments and replies

/// A double as Redis's `string2d` reads one: the whole text, no leading space, no overflow to infinity or
/// underflow to zero, not NaN.
fn parse_double(a: &[u8]) -> Option<f64> {
    if a.is_empty() || a[0].is_ascii_whitespace() {
        return None;
    }
    let s = std::str::from_utf8(a).ok()?;
    let v: f64 = s.parse().ok()?;
    if v.is_nan() {
        return None;
    }
    let body = s.trim_start_matches(['+', '-']);
    let named = body.bytes().next().is_some_and(|c| c.is_ascii_alphabetic());
    if v.is_infinite() && !named {
        return None;
    }
    let mantissa = body.split(['e', 'E']).next().unwrap_or("");
    if v == 0.0 && mantissa.bytes().any(|c| (b'1'..=b'9').contains(&c)) {
        return None;
    }
    Some(v)
}

fn double_or(a: &[u8], msg: &str) -> Result<f64, Reply> {
    parse_double(a).ok_or_else(|| Reply::err(msg))
}

/// A longitude and latitude argument pair, within the limits.
fn lon_lat(a: &[Bytes]) -> Result<[f64; 2], Reply> {
    let lon = double_or(&a[0], "value is not a valid float")?;
    let lat = double_or(&a[1], "value is not a valid float")?;
    if !(geo::LONG_MIN..=geo::LONG_MAX).contains(&lon) || !(geo::LAT_MIN..=geo::LAT_MAX).contains(&lat) {
        return Err(Reply::err(format!("invalid longitude,latitude pair {lon:.6},{lat:.6}")));
    }
    Ok([lon, lat])
}

/// Metres per unit of `M`, `KM`, `FT`, `MI`.
fn unit(a: &[u8]) -> Result<f64, Reply> {
    match &a.to_ascii_lowercase()[..] {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"ft" => Ok(0.3048),
        b"mi" => Ok(1609.34),
        _ => Err(Reply::err("unsupported unit provided. please use M, KM, FT, MI")),
    }
}

/// `radius unit`: the radius and the metres per unit.
fn radius(a: &[Bytes]) -> Result<(f64, f64), Reply> {
    let r = double_or(&a[0], "need numeric radius")?;
    if r < 0.0 {
        return Err(Reply::err("radius cannot be negative"));
    }
    Ok((r, unit(&a[1])?))
}

/// `width height unit`: the box and the metres per unit.
fn box_size(a: &[Bytes]) -> Result<(f64, f64, f64), Reply> {
    let w = double_or(&a[0], "need numeric width")?;
    let h = double_or(&a[1], "need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(Reply::err("height or width cannot be negative"));
    }
    Ok((w, h, unit(&a[2])?))
}

/// A distance as Redis prints one: four decimals, rounded half to even.
fn distance_reply(d: f64) -> Reply {
    let scaled = (d * 10000.0).round_ties_even();
    let text = if d == 0.0 {
        "0.0000".to_string()
    } else if scaled.abs() < 9.2e18 {
        let v = scaled as i64;
        let sign = if v < 0 { "-" } else { "" };
        let a = v.unsigned_abs();
        format!("{sign}{}.{:04}", a / 10000, a % 10000)
    } else {
        format!("{d:.4}")
    };
    Reply::Bulk(text.into())
}

/// A coordinate as Redis prints it in human form: `%.17Lf` with trailing zeros (and a bare point) removed.
pub fn human_double(v: f64) -> String {
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

fn coords_reply(lon: f64, lat: f64) -> Reply {
    Reply::Array(vec![Reply::Bulk(human_double(lon).into()), Reply::Bulk(human_double(lat).into())])
}

// ---------------------------------------------------------------------------------------------------------
// GEOADD, GEODIST, GEOHASH, GEOPOS

fn geoadd(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut j = 2;
    while j < args.len() {
        match &args[j].to_ascii_lowercase()[..] {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"ch" => ch = true,
            _ => break,
        }
        j += 1;
    }
    let rest = &args[j..];
    if !rest.len().is_multiple_of(3) || (nx && xx) || rest.is_empty() {
        return syntax_error();
    }
    let mut pairs = Vec::with_capacity(rest.len() / 3);
    for t in rest.chunks(3) {
        let [lon, lat] = tri!(lon_lat(&t[..2]));
        let Some(score) = geo::score_of(lon, lat) else {
            return Reply::err(format!("invalid longitude,latitude pair {lon:.6},{lat:.6}"));
        };
        tri!(zset::check_member(&t[2]));
        pairs.push((score, &t[2][..]));
    }
    let f = AddFlags { nx, xx, ..AddFlags::default() };
    let Some(outcomes) = tri!(zset::add(ctx, &args[1], &f, &pairs)) else { return Reply::Int(0) };
    let added = outcomes.iter().filter(|o| matches!(o, Added::New)).count();
    let changed = outcomes.iter().filter(|o| matches!(o, Added::Updated(_))).count();
    if added + changed > 0 {
        ctx.notify(crate::notify::ZSET, "zadd", &args[1]);
    }
    Reply::Int(if ch { added + changed } else { added } as i64)
}

fn geodist(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let to_meter = match args.len() {
        4 => 1.0,
        5 => tri!(unit(&args[4])),
        _ => return syntax_error(),
    };
    let ctx = ctx.pinned();
    let Some(c) = tri!(zset::get(&ctx, &args[1])) else { return Reply::Nil };
    let (Some(s1), Some(s2)) = (tri!(zset::score(&ctx, &c, &args[2])), tri!(zset::score(&ctx, &c, &args[3]))) else {
        return Reply::Nil;
    };
    let (a, b) = (geo::decode_score(s1), geo::decode_score(s2));
    distance_reply(geo::distance(a[0], a[1], b[0], b[1]) / to_meter)
}

fn geohash(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let c = tri!(zset::get(&ctx, &args[1]));
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in &args[2..] {
        let score = match &c {
            Some(c) => tri!(zset::score(&ctx, c, m)),
            None => None,
        };
        out.push(score.map_or(Reply::Nil, |s| Reply::Bulk(geo::geohash_string(s).into())));
    }
    Reply::Array(out)
}

fn geopos(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    let ctx = ctx.pinned();
    let c = tri!(zset::get(&ctx, &args[1]));
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in &args[2..] {
        let score = match &c {
            Some(c) => tri!(zset::score(&ctx, c, m)),
            None => None,
        };
        out.push(match score {
            Some(s) => {
                let [lon, lat] = geo::decode_score(s);
                coords_reply(lon, lat)
            }
            None => Reply::NilArray,
        });
    }
    Reply::Array(out)
}

// ---------------------------------------------------------------------------------------------------------
// GEOSEARCH, GEOSEARCHSTORE, GEORADIUS* (one parser, as in Redis)

/// Which command is parsing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS(_RO): centre and radius as positional arguments.
    Radius { store_ok: bool },
    /// GEORADIUSBYMEMBER(_RO): member and radius as positional arguments.
    ByMember { store_ok: bool },
    /// GEOSEARCH / GEOSEARCHSTORE.
    Search { store: bool },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A parsed and run search: what to reply or store.
struct Outcome {
    found: Vec<Found>,
    conversion: f64,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    /// The destination and whether it stores distances (STORE/STOREDIST, GEOSEARCHSTORE).
    store: Option<(Bytes, bool)>,
}

/// Parses the arguments after the source key and runs the search on `c` (the source, `None` when missing),
/// in Redis's order of checks.
fn run_search(ctx: &ReadCtx<'_>, c: Option<&Coll>, args: &Args, kind: Kind) -> Result<Outcome, Reply> {
    let mut center: Option<[f64; 2]> = None;
    let mut shape: Option<Shape> = None;
    let mut conversion = 1.0;
    let mut store: Option<(Bytes, bool)> = None;
    let base = match kind {
        Kind::Radius { .. } => {
            center = Some(lon_lat(&args[2..4])?);
            let (r, conv) = radius(&args[4..6])?;
            shape = Some(Shape::Radius(r));
            conversion = conv;
            6
        }
        Kind::ByMember { .. } => {
            if let Some(c) = c {
                center = Some(member_position(ctx, c, &args[2])?);
                let (r, conv) = radius(&args[3..5])?;
                shape = Some(Shape::Radius(r));
                conversion = conv;
            }
            5
        }
        Kind::Search { store: true } => {
            store = Some((args[1].clone(), false));
            3
        }
        Kind::Search { store: false } => 2,
    };
    let is_search = matches!(kind, Kind::Search { .. });
    let store_ok = matches!(kind, Kind::Radius { store_ok: true } | Kind::ByMember { store_ok: true });
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let opts = &args[base.min(args.len())..];
    let remaining = opts.len();
    let mut i = 0;
    while i < remaining {
        let a = opts[i].to_ascii_lowercase();
        match &a[..] {
            b"withdist" => withdist = true,
            b"withhash" => withhash = true,
            b"withcoord" => withcoord = true,
            b"any" => any = true,
            b"asc" => sort = Sort::Asc,
            b"desc" => sort = Sort::Desc,
            b"count" if i + 1 < remaining => {
                count = arg_i64(&opts[i + 1])?;
                if count <= 0 {
                    return Err(Reply::err("COUNT must be > 0"));
                }
                i += 1;
            }
            b"store" | b"storedist" if i + 1 < remaining && store_ok => {
                store = Some((opts[i + 1].clone(), a == b"storedist"));
                i += 1;
            }
            b"storedist" if matches!(kind, Kind::Search { store: true }) => {
                if let Some(s) = &mut store {
                    s.1 = true;
                }
            }
            b"frommember" if i + 1 < remaining && is_search && !fromloc => {
                if let Some(c) = c {
                    center = Some(member_position(ctx, c, &opts[i + 1])?);
                }
                frommember = true;
                i += 1;
            }
            b"fromlonlat" if i + 2 < remaining && is_search && !frommember => {
                center = Some(lon_lat(&opts[i + 1..i + 3])?);
                fromloc = true;
                i += 2;
            }
            b"byradius" if i + 2 < remaining && is_search && !bybox => {
                let (r, conv) = radius(&opts[i + 1..i + 3])?;
                shape = Some(Shape::Radius(r));
                conversion = conv;
                byradius = true;
                i += 2;
            }
            b"bybox" if i + 3 < remaining && is_search && !byradius => {
                let (w, h, conv) = box_size(&opts[i + 1..i + 4])?;
                shape = Some(Shape::Box { width: w, height: h });
                conversion = conv;
                bybox = true;
                i += 3;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        let who =
            if matches!(kind, Kind::Search { store: true }) { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
        return Err(Reply::err(format!("{who} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")));
    }
    let name = String::from_utf8_lossy(&args[0]);
    if is_search && !(frommember || fromloc) {
        return Err(Reply::err(format!("exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}")));
    }
    if is_search && !(byradius || bybox) {
        return Err(Reply::err(format!("exactly one of BYRADIUS and BYBOX can be specified for {name}")));
    }
    if any && count == 0 {
        return Err(Reply::err("the ANY argument requires COUNT argument"));
    }
    let mut out = Outcome { found: Vec::new(), conversion, withdist, withhash, withcoord, store };
    let (Some(c), Some(center), Some(shape)) = (c, center, shape) else { return Ok(out) };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let search = Search { center, shape, conversion };
    let limit = (any && count > 0).then_some(count as u64);
    let mut found = geo::search(ctx, c, &search, limit).map_err(Reply::from)?;
    match sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    if count > 0 {
        found.truncate(count as usize);
    }
    out.found = found;
    Ok(out)
}

/// The position of `member` of `c`, or Redis's error when it is not a member.
fn member_position(ctx: &ReadCtx<'_>, c: &Coll, member: &[u8]) -> Result<[f64; 2], Reply> {
    match zset::score(ctx, c, member).map_err(Reply::from)? {
        Some(s) => Ok(geo::decode_score(s)),
        None => Err(Reply::err("could not decode requested zset member")),
    }
}

/// The reply of a search without STORE.
fn found_reply(o: Outcome) -> Reply {
    let extra = o.withdist || o.withhash || o.withcoord;
    let items = o
        .found
        .into_iter()
        .map(|f| {
            if !extra {
                return Reply::Bulk(f.member.into());
            }
            let mut item = vec![Reply::Bulk(f.member.into())];
            if o.withdist {
                item.push(distance_reply(f.dist / o.conversion));
            }
            if o.withhash {
                item.push(Reply::Int(f.score as i64));
            }
            if o.withcoord {
                item.push(coords_reply(f.lon, f.lat));
            }
            Reply::Array(item)
        })
        .collect();
    Reply::Array(items)
}

/// A search in a read handler (no STORE possible).
fn search_read(ctx: &ReadCtx<'_>, args: &Args, src: usize, kind: Kind) -> Reply {
    let ctx = ctx.pinned();
    let c = tri!(zset::get(&ctx, &args[src]));
    found_reply(tri!(run_search(&ctx, c.as_ref(), args, kind)))
}

/// A search in the commit step: replies, or stores the result (members with their geohash scores, or
/// with STOREDIST their distances) and answers its size; a missing source deletes the destination.
fn search_write(ctx: &mut WriteCtx<'_>, args: &Args, src: usize, kind: Kind) -> Reply {
    let c = tri!(zset::get_mut(ctx, &args[src]));
    if c.is_none() {
        ctx.note_miss(&args[src]);
    }
    let o = {
        let view = ctx.view();
        tri!(run_search(&view, c.as_ref(), args, kind))
    };
    let Some((dst, storedist)) = o.store.clone() else { return found_reply(o) };
    let items: Vec<(Vec<u8>, f64)> = o
        .found
        .into_iter()
        .map(|f| {
            let score = if storedist { f.dist / o.conversion } else { f.score };
            (f.member, score)
        })
        .collect();
    let existed = ctx.notify_flags != 0 && ctx.stored_now(&dst);
    ctx.replacing = existed.then(|| dst.clone());
    let stored = zset::store(ctx, &dst, &items);
    ctx.replacing = None;
    let n = tri!(stored);
    if n > 0 {
        let event = if matches!(kind, Kind::Search { .. }) { "geosearchstore" } else { "georadiusstore" };
        ctx.notify(crate::notify::ZSET, event, &dst);
    } else if existed {
        ctx.notify(crate::notify::GENERIC, "del", &dst);
    }
    Reply::Int(n as i64)
}

fn georadius(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    search_write(ctx, args, 1, Kind::Radius { store_ok: true })
}

fn georadius_ro(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    search_read(ctx, args, 1, Kind::Radius { store_ok: false })
}

fn georadiusbymember(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    search_write(ctx, args, 1, Kind::ByMember { store_ok: true })
}

fn georadiusbymember_ro(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    search_read(ctx, args, 1, Kind::ByMember { store_ok: false })
}

fn geosearch(ctx: &ReadCtx<'_>, args: &Args) -> Reply {
    search_read(ctx, args, 1, Kind::Search { store: false })
}

fn geosearchstore(ctx: &mut WriteCtx<'_>, args: &Args) -> Reply {
    search_write(ctx, args, 2, Kind::Search { store: true })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_redis() {
        assert_eq!(distance_reply(166274.15156960033), Reply::Bulk("166274.1516".into()));
        assert_eq!(distance_reply(0.0), Reply::Bulk("0.0000".into()));
        assert_eq!(distance_reply(0.00004), Reply::Bulk("0.0000".into()));
        assert_eq!(distance_reply(1.23456), Reply::Bulk("1.2346".into()));
        // GEOPOS Sicily Palermo on redis-server 7.0.
        let [lon, lat] = geo::decode_score(3479099956230698.0);
        assert_eq!(human_double(lon), "13.36138933897018433");
        assert_eq!(human_double(lat), "38.11555639549629859");
        assert_eq!(human_double(10.0), "10");
        assert_eq!(human_double(-0.0), "0");
        assert_eq!(parse_double(b"1e999"), None);
        assert_eq!(parse_double(b" 1"), None);
        assert_eq!(parse_double(b"1e-400"), None);
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"nan"), None);
        assert_eq!(parse_double(b"12.5"), Some(12.5));
    }
}
