//! The frames nodes exchange over TCP (docs/format/raft-wire.md).
//!
//! ```text
//! stream   := frame*                                ; one request, then its reply, then the next request
//! frame    := version:u8 kind:u8 length:fixed32 payload:byte{length} crc:fixed32
//! version  := 0x02                                  ; FROZEN; bumped on any change of this grammar or a payload
//! kind     := 0x01 append_entries | 0x02 vote | 0x03 install_snapshot                ; requests, FROZEN
//!           | 0x81 append_entries_reply | 0x82 vote_reply | 0x83 install_snapshot_reply ; FROZEN
//!           | 0xff refused                                                           ; FROZEN
//! length   := the payload's byte count, at most the receiver's limit (default MAX_FRAME)
//! payload  := postcard(to:u64, request)             ; requests: `to` is the node id the sender means to reach
//!           | postcard(Result<reply, RaftError>)    ; replies, openraft 0.9's serde types
//!           | postcard(reason:string)               ; refused: the connection closes after it
//! crc      := crc32c(version kind length payload)   ; not masked
//! ```
//!
//! Integers are little-endian. A reader checks version, kind and length from the 6-byte header before it reads
//! (or allocates for) the payload: a length over the limit is an error and the connection is closed, never a
//! large allocation. The payload is read into a buffer that grows with the bytes that actually arrive, so a
//! lying length within the limit costs no more memory than the bytes sent. The checksum is checked before the
//! payload is decoded, and the payload must decode to exactly its length.

use std::io;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The format version written in every frame.
pub const VERSION: u8 = 2;
/// The default largest payload a frame may carry: one log entry at the log's own limit (64 MiB, codec.rs) and
/// room for the request around it. An append of several entries above it is split (openraft's
/// `PayloadTooLarge`); a snapshot travels in chunks of `Config::snapshot_max_chunk_size`.
pub const MAX_FRAME: usize = (64 << 20) + (1 << 20);
/// Header bytes before the payload: version, kind, length.
pub const HEADER: usize = 1 + 1 + 4;

/// What a frame holds. FROZEN: the values are on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// openraft's `AppendEntriesRequest`.
    AppendEntries = 0x01,
    /// openraft's `VoteRequest`.
    Vote = 0x02,
    /// openraft's `InstallSnapshotRequest` (one chunk).
    InstallSnapshot = 0x03,
    /// The reply to an append.
    AppendEntriesReply = 0x81,
    /// The reply to a vote request.
    VoteReply = 0x82,
    /// The reply to a snapshot chunk.
    InstallSnapshotReply = 0x83,
    /// The receiver will not serve this connection (wrong node id, shutting down); it closes after this frame.
    Refused = 0xff,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            0x01 => Kind::AppendEntries,
            0x02 => Kind::Vote,
            0x03 => Kind::InstallSnapshot,
            0x81 => Kind::AppendEntriesReply,
            0x82 => Kind::VoteReply,
            0x83 => Kind::InstallSnapshotReply,
            0xff => Kind::Refused,
            _ => return None,
        })
    }

    /// The reply kind a request kind expects.
    pub fn reply(self) -> Kind {
        match self {
            Kind::AppendEntries => Kind::AppendEntriesReply,
            Kind::Vote => Kind::VoteReply,
            Kind::InstallSnapshot => Kind::InstallSnapshotReply,
            other => other,
        }
    }
}

/// Why a frame could not be read, written or decoded.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The socket failed.
    #[error("transport I/O: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection between frames.
    #[error("the connection was closed")]
    Closed,
    /// The peer closed the connection inside a frame.
    #[error("truncated frame: {got} of {expected} bytes")]
    Truncated {
        /// Bytes the frame announced.
        expected: usize,
        /// Bytes that arrived.
        got: usize,
    },
    /// A version this build does not speak.
    #[error(
        "frame version {0} is not the supported {VERSION} (every member of a group runs the same ShaleDB release)"
    )]
    Version(u8),
    /// A kind byte that names no frame.
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    /// A frame of another kind than the protocol expects here.
    #[error("a {found:?} frame where a {expected:?} was expected")]
    UnexpectedKind {
        /// What came.
        found: Kind,
        /// What was due.
        expected: Kind,
    },
    /// A length above the limit, refused before any allocation.
    #[error("frame length {length} exceeds the limit of {limit}")]
    TooLarge {
        /// The announced length.
        length: usize,
        /// The receiver's limit.
        limit: usize,
    },
    /// The checksum does not match the bytes.
    #[error("frame checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The frame's crc.
        stored: u32,
        /// The crc of the bytes received.
        computed: u32,
    },
    /// A checked frame whose payload does not decode (or leaves bytes over).
    #[error("{kind:?} payload: {what}")]
    Payload {
        /// The frame's kind.
        kind: Kind,
        /// What was wrong.
        what: String,
    },
    /// No complete frame within the time allowed.
    #[error("no complete frame within {0:?}")]
    Timeout(Duration),
}

/// Encodes `value` as one frame of `kind`; `Err(size)` when the payload exceeds `limit`.
pub fn encode<T: Serialize>(kind: Kind, value: &T, limit: usize) -> Result<Vec<u8>, WireError> {
    let payload =
        postcard::to_stdvec(value).map_err(|e| WireError::Payload { kind, what: format!("encoding: {e}") })?;
    if payload.len() > limit || u32::try_from(payload.len()).is_err() {
        return Err(WireError::TooLarge { length: payload.len(), limit });
    }
    let mut out = Vec::with_capacity(HEADER + payload.len() + 4);
    out.push(VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Checks a header: version, kind, and the length against `limit`. Returns the kind and the payload length.
pub fn check_header(header: &[u8; HEADER], limit: usize) -> Result<(Kind, usize), WireError> {
    if header[0] != VERSION {
        return Err(WireError::Version(header[0]));
    }
    let kind = Kind::from_u8(header[1]).ok_or(WireError::UnknownKind(header[1]))?;
    let length = u32::from_le_bytes([header[2], header[3], header[4], header[5]]) as usize;
    if length > limit {
        return Err(WireError::TooLarge { length, limit });
    }
    Ok((kind, length))
}

/// Checks the crc of a frame whose header and payload+crc bytes are given.
fn check_crc(header: &[u8; HEADER], rest: &[u8]) -> Result<(), WireError> {
    let Some(split) = rest.len().checked_sub(4) else {
        return Err(WireError::Truncated { expected: 4, got: rest.len() });
    };
    let (payload, crc) = rest.split_at(split);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let computed = crc32c::crc32c_append(crc32c::crc32c(header), payload);
    if stored != computed {
        return Err(WireError::Checksum { stored, computed });
    }
    Ok(())
}

/// Decodes one whole frame held in memory (a test or fuzz entry point; the stream reader does the same checks).
pub fn decode_frame(data: &[u8], limit: usize) -> Result<(Kind, &[u8]), WireError> {
    let Some(header) = data.get(..HEADER) else {
        return Err(WireError::Truncated { expected: HEADER, got: data.len() });
    };
    let mut h = [0u8; HEADER];
    h.copy_from_slice(header);
    let (kind, length) = check_header(&h, limit)?;
    let expected = length.checked_add(HEADER + 4).ok_or(WireError::TooLarge { length, limit })?;
    let rest = &data[HEADER..];
    if data.len() != expected {
        return Err(WireError::Truncated { expected, got: data.len() });
    }
    check_crc(&h, rest)?;
    Ok((kind, &rest[..length]))
}

/// Decodes a checked payload into `T`, which must consume it exactly.
pub fn decode_payload<T: DeserializeOwned>(kind: Kind, payload: &[u8]) -> Result<T, WireError> {
    let (value, rest) = postcard::take_from_bytes::<T>(payload)
        .map_err(|e| WireError::Payload { kind, what: format!("does not decode: {e}") })?;
    if !rest.is_empty() {
        return Err(WireError::Payload { kind, what: format!("{} bytes left over after the value", rest.len()) });
    }
    Ok(value)
}

async fn timed<T>(
    limit: Option<Duration>,
    f: impl std::future::Future<Output = Result<T, WireError>>,
) -> Result<T, WireError> {
    match limit {
        None => f.await,
        Some(d) => tokio::time::timeout(d, f).await.map_err(|_| WireError::Timeout(d))?,
    }
}

/// Reads one frame: its kind and checked payload. `idle` bounds the wait for the frame's first byte (`None`:
/// wait as long as the peer stays connected), `io` the rest of the frame once it started.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    limit: usize,
    idle: Option<Duration>,
    io: Duration,
) -> Result<(Kind, Vec<u8>), WireError> {
    let mut header = [0u8; HEADER];
    let first = timed(idle, async { Ok(r.read(&mut header[..1]).await?) }).await?;
    if first == 0 {
        return Err(WireError::Closed);
    }
    timed(Some(io), async {
        read_full(r, &mut header[1..], HEADER).await?;
        let (kind, length) = check_header(&header, limit)?;
        // Grows with the bytes that arrive: `length` is trusted for nothing but the upper bound.
        let want = length.checked_add(4).ok_or(WireError::TooLarge { length, limit })?;
        let mut rest = Vec::with_capacity(want.min(64 << 10));
        (&mut *r).take(want as u64).read_to_end(&mut rest).await?;
        if rest.len() != want {
            return Err(WireError::Truncated {
                expected: want.saturating_add(HEADER),
                got: rest.len().saturating_add(HEADER),
            });
        }
        check_crc(&header, &rest)?;
        rest.truncate(length);
        Ok((kind, rest))
    })
    .await
}

async fn read_full<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8], frame: usize) -> Result<(), WireError> {
    let mut got = 0;
    while got < buf.len() {
        let n = r.read(&mut buf[got..]).await?;
        if n == 0 {
            return Err(WireError::Truncated { expected: frame, got: frame - buf.len() + got });
        }
        got += n;
    }
    Ok(())
}

/// Writes one encoded frame within `io`.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8], io: Duration) -> Result<(), WireError> {
    timed(Some(io), async {
        w.write_all(frame).await?;
        w.flush().await?;
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    const IO: Duration = Duration::from_secs(1);

    fn frame() -> Vec<u8> {
        encode(Kind::Vote, &(7u64, String::from("hello")), MAX_FRAME).unwrap()
    }

    fn read(bytes: &[u8], limit: usize) -> Result<(Kind, Vec<u8>), WireError> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let mut r = bytes;
        rt.block_on(read_frame(&mut r, limit, None, IO))
    }

    #[test]
    fn round_trip_in_memory_and_from_a_stream() {
        let f = frame();
        let (kind, payload) = decode_frame(&f, MAX_FRAME).unwrap();
        assert_eq!(kind, Kind::Vote);
        assert_eq!(decode_payload::<(u64, String)>(kind, payload).unwrap(), (7, "hello".to_string()));
        let (kind, payload) = read(&f, MAX_FRAME).unwrap();
        assert_eq!(kind, Kind::Vote);
        assert_eq!(decode_payload::<(u64, String)>(kind, &payload).unwrap(), (7, "hello".to_string()));
    }

    #[test]
    fn checksum_mismatch() {
        for at in [1, HEADER, HEADER + 3] {
            let mut f = frame();
            f[at] ^= 0x20;
            let e = decode_frame(&f, MAX_FRAME).unwrap_err();
            // Flipping the kind byte may make it unknown instead: both refuse the frame before decoding.
            assert!(matches!(e, WireError::Checksum { .. } | WireError::UnknownKind(_)), "{e}");
        }
        let mut f = frame();
        let last = f.len() - 1;
        f[last] ^= 1;
        assert!(matches!(decode_frame(&f, MAX_FRAME).unwrap_err(), WireError::Checksum { .. }));
        assert!(matches!(read(&f, MAX_FRAME).unwrap_err(), WireError::Checksum { .. }));
    }

    #[test]
    fn truncated_frame() {
        let f = frame();
        for cut in [1, HEADER - 1, HEADER, f.len() - 1] {
            let e = decode_frame(&f[..cut], MAX_FRAME).unwrap_err();
            assert!(matches!(e, WireError::Truncated { .. }), "cut {cut}: {e}");
            let e = read(&f[..cut], MAX_FRAME).unwrap_err();
            assert!(matches!(e, WireError::Truncated { .. }), "cut {cut}: {e}");
        }
        assert!(matches!(read(&[], MAX_FRAME).unwrap_err(), WireError::Closed));
    }

    #[test]
    fn length_over_the_limit_is_refused_before_reading_the_payload() {
        let mut f = frame();
        f[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
        // Only the header is there: the reader must refuse on the header alone, allocating nothing for it.
        let e = read(&f[..HEADER], MAX_FRAME).unwrap_err();
        assert!(matches!(e, WireError::TooLarge { length, .. } if length == u32::MAX as usize), "{e}");
        assert!(e.to_string().contains("exceeds the limit"));
        // A limit smaller than an honest frame refuses it the same way.
        let f = frame();
        assert!(matches!(decode_frame(&f, 3).unwrap_err(), WireError::TooLarge { limit: 3, .. }));
        // And a sender refuses to build one.
        assert!(matches!(encode(Kind::Vote, &vec![0u8; 100], 10).unwrap_err(), WireError::TooLarge { .. }));
    }

    #[test]
    fn unknown_version() {
        let mut f = frame();
        // Version 1 (before proposals carried tables) is refused as any other: members of a group run one version.
        f[0] = 1;
        assert!(matches!(decode_frame(&f, MAX_FRAME).unwrap_err(), WireError::Version(1)));
        assert!(matches!(read(&f, MAX_FRAME).unwrap_err(), WireError::Version(1)));
        assert!(read(&f, MAX_FRAME).unwrap_err().to_string().contains("version 1"));
    }

    #[test]
    fn unknown_kind() {
        let mut f = frame();
        f[1] = 0x44;
        assert!(matches!(read(&f, MAX_FRAME).unwrap_err(), WireError::UnknownKind(0x44)));
    }

    #[test]
    fn payload_that_does_not_decode_or_leaves_bytes() {
        let f = encode(Kind::Vote, &(7u64,), MAX_FRAME).unwrap();
        let (kind, payload) = decode_frame(&f, MAX_FRAME).unwrap();
        assert!(matches!(decode_payload::<(u64, String)>(kind, payload), Err(WireError::Payload { .. })));
        let f = encode(Kind::Vote, &(7u64, 8u64), MAX_FRAME).unwrap();
        let (kind, payload) = decode_frame(&f, MAX_FRAME).unwrap();
        let e = decode_payload::<(u64,)>(kind, payload).unwrap_err();
        assert!(e.to_string().contains("left over"), "{e}");
    }

    #[test]
    fn idle_and_io_timeouts() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            // Nothing arrives: the idle bound ends the wait.
            let (mut a, _b) = tokio::io::duplex(64);
            let e = read_frame(&mut a, MAX_FRAME, Some(Duration::from_millis(20)), IO).await.unwrap_err();
            assert!(matches!(e, WireError::Timeout(_)), "{e}");
            // Half a frame arrives and then nothing: the io bound ends it.
            let (mut a, mut b) = tokio::io::duplex(64);
            let f = frame();
            b.write_all(&f[..HEADER + 2]).await.unwrap();
            let e = read_frame(&mut a, MAX_FRAME, None, Duration::from_millis(20)).await.unwrap_err();
            assert!(matches!(e, WireError::Timeout(_)), "{e}");
        });
    }
}
