//! GEO on sorted sets: a place is a member whose score is its 52-bit interleaved geohash, computed exactly as
//! Redis 7.0 computes it (so scores, positions, distances and search results equal redis-server's), and the
//! search that Redis runs: the geohash box around the centre at a precision picked from the radius, its
//! eight neighbours (those that cannot hold a match left out), each box one score range of the sorted set,
//! every candidate checked against the circle or box with the haversine distance.
//!
//! Facts of Redis's scheme used here: longitudes -180..180 and latitudes -85.05112878..85.05112878 are each
//! scaled to 26 bits; the hash interleaves them (latitude in the even bits, longitude in the odd ones); the
//! earth radius is 6372797.560856 m; GEOHASH re-encodes a position with the standard latitude range -90..90
//! and prints 11 base32 characters, the last one always `0`.

use crate::keys::Coll;
use crate::store::ReadCtx;
use crate::types::zset::{self, Limit, Range, ScoreRange};

/// Bits per coordinate (26 * 2 = 52: the score is exact in a double).
pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
/// Earth's quadratic mean radius for WGS-84, in metres (Redis's figure).
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// A geohash of `step` bits per coordinate; `step == 0 && bits == 0` is "no box".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash left-aligned to 52 bits: the sorted-set score of its box's first place.
    pub fn align52(&self) -> u64 {
        self.bits << (52 - self.step as u32 * 2)
    }
}

/// A range of one coordinate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CoordRange {
    pub min: f64,
    pub max: f64,
}

/// The area of a geohash box.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Area {
    pub longitude: CoordRange,
    pub latitude: CoordRange,
}

const WGS84_LONG: CoordRange = CoordRange { min: LONG_MIN, max: LONG_MAX };
const WGS84_LAT: CoordRange = CoordRange { min: LAT_MIN, max: LAT_MAX };

fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

fn squeeze(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((x | (x >> 16)) & 0x0000_0000_FFFF_FFFF) as u32
}

/// Encodes a position at `step` bits per coordinate within the given ranges; `None` outside them (or
/// outside Redis's WGS-84 limits).
pub fn encode_in(long_r: CoordRange, lat_r: CoordRange, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || lon < long_r.min || lon > long_r.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let long_off = (lon - long_r.min) / (long_r.max - long_r.min) * scale;
    Some(Hash { bits: spread(lat_off as u32) | (spread(long_off as u32) << 1), step })
}

/// [`encode_in`] with Redis's WGS-84 ranges.
pub fn encode(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode_in(WGS84_LONG, WGS84_LAT, lon, lat, step)
}

/// The score GEOADD stores for a position (checked against the limits first).
pub fn score_of(lon: f64, lat: f64) -> Option<f64> {
    encode(lon, lat, STEP_MAX).map(|h| h.align52() as f64)
}

/// The area of the box `h`.
pub fn decode_area(h: Hash) -> Option<Area> {
    if h.is_zero() {
        return None;
    }
    let lat_scale = WGS84_LAT.max - WGS84_LAT.min;
    let long_scale = WGS84_LONG.max - WGS84_LONG.min;
    let ilat = squeeze(h.bits);
    let ilon = squeeze(h.bits >> 1);
    let div = (1u64 << h.step) as f64;
    Some(Area {
        latitude: CoordRange {
            min: WGS84_LAT.min + (ilat as f64 / div) * lat_scale,
            max: WGS84_LAT.min + ((ilat as f64 + 1.0) / div) * lat_scale,
        },
        longitude: CoordRange {
            min: WGS84_LONG.min + (ilon as f64 / div) * long_scale,
            max: WGS84_LONG.min + ((ilon as f64 + 1.0) / div) * long_scale,
        },
    })
}

/// The position a score stands for: the centre of its box, clamped to the limits (`[lon, lat]`).
pub fn decode_score(score: f64) -> [f64; 2] {
    let h = Hash { bits: score as u64, step: STEP_MAX };
    // A hash with a non-zero step always decodes.
    let a = decode_area(h).unwrap_or_default();
    let lon = ((a.longitude.min + a.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.latitude.min + a.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// The standard 11-character geohash of a score (GEOHASH).
pub fn geohash_string(score: f64) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [lon, lat] = decode_score(score);
    let h = encode_in(WGS84_LONG, CoordRange { min: -90.0, max: 90.0 }, lon, lat, STEP_MAX).unwrap_or_default();
    (0..11)
        .map(|i| {
            let idx = if i == 10 { 0 } else { (h.bits >> (52 - (i + 1) * 5)) & 0x1f };
            ALPHABET[idx as usize] as char
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------------------
// Distances

/// The distance along a meridian between two latitudes, in metres.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine distance between two positions, in metres.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

// ---------------------------------------------------------------------------------------------------------
// Search

/// What a search covers: a circle (radius) or a box (width, height), in the unit of `conversion` metres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// A search: the centre (`[lon, lat]`), the shape and the unit (metres per unit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Search {
    pub center: [f64; 2],
    pub shape: Shape,
    pub conversion: f64,
}

/// A place found by a search.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub member: Vec<u8>,
    pub score: f64,
    pub lon: f64,
    pub lat: f64,
    /// In metres.
    pub dist: f64,
}

/// The step (bits per coordinate) whose boxes are about the size of `range_m` around latitude `lat`.
fn steps_for_radius(mut range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// Moves a hash one box east (`d > 0`) or west along the longitude bits.
fn move_x(h: &mut Hash, d: i8) {
    if d == 0 || h.step == 0 || h.step > 32 {
        return;
    }
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let shift = 64 - h.step as u32 * 2;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    let x = if d > 0 { x.wrapping_add(zz + 1) } else { (x | zz).wrapping_sub(zz + 1) };
    h.bits = (x & (0xaaaa_aaaa_aaaa_aaaau64 >> shift)) | y;
}

/// Moves a hash one box north (`d > 0`) or south along the latitude bits.
fn move_y(h: &mut Hash, d: i8) {
    if d == 0 || h.step == 0 || h.step > 32 {
        return;
    }
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let shift = 64 - h.step as u32 * 2;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    let y = if d > 0 { y.wrapping_add(zz + 1) } else { (y | zz).wrapping_sub(zz + 1) };
    h.bits = x | (y & (0x5555_5555_5555_5555u64 >> shift));
}

fn moved(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

/// The bounding box of a search in degrees: `[min_lon, min_lat, max_lon, max_lat]`.
fn bounding_box(s: &Search) -> [f64; 4] {
    let [lon, lat] = s.center;
    let (h, w) = match s.shape {
        Shape::Radius(r) => (r, r),
        Shape::Box { width, height } => (height / 2.0, width / 2.0),
    };
    let (height, width) = (s.conversion * h, s.conversion * w);
    let lat_delta = rad_deg(height / EARTH_RADIUS_M);
    let long_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(lat + lat_delta).cos());
    let long_delta_bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(lat - lat_delta).cos());
    let southern = lat < 0.0;
    let min_lon = if southern { lon - long_delta_bottom } else { lon - long_delta_top };
    let max_lon = if southern { lon + long_delta_bottom } else { lon + long_delta_top };
    [min_lon, lat - lat_delta, max_lon, lat + lat_delta]
}

/// The boxes a search scans, in Redis's order (centre, N, S, E, W, NE, NW, SE, SW); a zero hash is a box
/// left out.
pub fn boxes(s: &Search) -> [Hash; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(s);
    let [lon, lat] = s.center;
    let radius_m = match s.shape {
        Shape::Radius(r) => r,
        Shape::Box { width, height } => ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt(),
    } * s.conversion;
    let mut steps = steps_for_radius(radius_m, lat);
    let neighbours = |h: Hash| {
        [
            h,
            moved(h, 0, 1),
            moved(h, 0, -1),
            moved(h, 1, 0),
            moved(h, -1, 0),
            moved(h, 1, 1),
            moved(h, -1, 1),
            moved(h, 1, -1),
            moved(h, -1, -1),
        ]
    };
    let mut hash = encode(lon, lat, steps).unwrap_or_default();
    let mut n = neighbours(hash);
    // Step down once when a neighbour does not reach the bounding box.
    let area_of = |h: Hash| decode_area(h).unwrap_or_default();
    let decrease = area_of(n[1]).latitude.max < max_lat
        || area_of(n[2]).latitude.min > min_lat
        || area_of(n[3]).longitude.max < max_lon
        || area_of(n[4]).longitude.min > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        hash = encode(lon, lat, steps).unwrap_or_default();
        n = neighbours(hash);
    }
    let area = area_of(hash);
    if steps >= 2 {
        let zero = Hash::default();
        if area.latitude.min < min_lat {
            n[2] = zero; // south
            n[8] = zero; // south-west
            n[7] = zero; // south-east
        }
        if area.latitude.max > max_lat {
            n[1] = zero; // north
            n[5] = zero; // north-east
            n[6] = zero; // north-west
        }
        if area.longitude.min < min_lon {
            n[4] = zero; // west
            n[8] = zero;
            n[6] = zero;
        }
        if area.longitude.max > max_lon {
            n[3] = zero; // east
            n[7] = zero;
            n[5] = zero;
        }
    }
    n
}

/// The position of `score` and its distance from the centre if it lies within the search's shape.
pub fn within(s: &Search, score: f64) -> Option<([f64; 2], f64)> {
    let xy = decode_score(score);
    let [cx, cy] = s.center;
    match s.shape {
        Shape::Radius(r) => {
            let d = distance(cx, cy, xy[0], xy[1]);
            (d <= r * s.conversion).then_some((xy, d))
        }
        Shape::Box { width, height } => {
            let (w, h) = (width * s.conversion, height * s.conversion);
            if lat_distance(xy[1], cy) > h / 2.0 {
                return None;
            }
            if distance(xy[0], xy[1], cx, xy[1]) > w / 2.0 {
                return None;
            }
            Some((xy, distance(cx, cy, xy[0], xy[1])))
        }
    }
}

/// The places of the sorted set `c` within the search, box by box in score order; with `limit` (COUNT ANY)
/// it stops once that many are found.
pub fn search(ctx: &ReadCtx<'_>, c: &Coll, s: &Search, limit: Option<u64>) -> Result<Vec<Found>, zset::Error> {
    let hashes = boxes(s);
    let mut out: Vec<Found> = Vec::new();
    let full = |out: &Vec<Found>| limit.is_some_and(|l| out.len() as u64 >= l);
    let mut last: usize = 0;
    for (i, h) in hashes.iter().enumerate() {
        if h.is_zero() {
            continue;
        }
        // Huge radii make neighbours repeat: skip a box equal to the last one scanned.
        if last != 0 && *h == hashes[last] {
            continue;
        }
        if full(&out) {
            break;
        }
        let min = h.align52() as f64;
        let max = Hash { bits: h.bits + 1, step: h.step }.align52() as f64;
        let r = Range::Score(ScoreRange { min, minex: false, max, maxex: true });
        for (member, score) in zset::run(ctx, c, &r, false, Limit::ALL)? {
            if let Some((xy, dist)) = within(s, score) {
                out.push(Found { member, score, lon: xy[0], lat: xy[1], dist });
                if full(&out) {
                    break;
                }
            }
        }
        last = i;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_and_hashes_match_redis() {
        // GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania on redis-server 7.0.
        assert_eq!(score_of(13.361389, 38.115556), Some(3479099956230698.0));
        assert_eq!(score_of(15.087269, 37.502669), Some(3479447370796909.0));
        assert_eq!(geohash_string(3479099956230698.0), "sqc8b49rny0");
        assert_eq!(geohash_string(3479447370796909.0), "sqdtr74hyu0");
        let d = distance(
            decode_score(3479099956230698.0)[0],
            decode_score(3479099956230698.0)[1],
            decode_score(3479447370796909.0)[0],
            decode_score(3479447370796909.0)[1],
        );
        assert!((d - 166274.1516).abs() < 0.0001, "{d}");
        assert_eq!(score_of(181.0, 0.0), None);
        assert_eq!(score_of(0.0, 85.06), None);
    }

    #[test]
    fn interleave_round_trips() {
        for v in [0u32, 1, 0x3ff_ffff, 0x155_5555, 12345678] {
            assert_eq!(squeeze(spread(v)), v);
            assert_eq!(squeeze(spread(v) << 1 >> 1), v);
        }
    }

    #[test]
    fn neighbours_move_one_box() {
        let h = encode(10.0, 10.0, 10).unwrap();
        let a = decode_area(h).unwrap();
        let e = decode_area(moved(h, 1, 0)).unwrap();
        let n = decode_area(moved(h, 0, 1)).unwrap();
        assert!((e.longitude.min - a.longitude.max).abs() < 1e-9);
        assert!((n.latitude.min - a.latitude.max).abs() < 1e-9);
        assert_eq!(moved(moved(h, 1, 1), -1, -1), h);
    }
}
