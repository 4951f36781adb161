//! The four frames of the runtime-filter transport (docs/FORMAT.md § 16):
//! a *post* (tap task → coordinator: a partial filter, or the task's
//! failure), a *fetch* (probe task → coordinator: "my filter, please"), a
//! *unit* (coordinator → probe task: the filter message, or "pass every
//! row" and why) and an *acknowledgement* (probe task → coordinator: "I
//! received the filter and read it", or could not).
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic: `FSRP` (post), `FSRQ` (fetch), `FSRU` (unit) or `FSRA` (acknowledgement, version 3) |
//! | 1 | version, 3 (2 is still read) |
//! | 1 | kind: 1 = filter message, 2 = pass-all (unit) / failed (post), 3 = bounds and filter message (version 3) |
//! | 2 | reserved, zero |
//! | 4 | body length `n` (little-endian) |
//! | n | body |
//! | 4 | CRC32 (IEEE) of every byte before it |
//!
//! A post's body starts with the filter id (16 bytes), the execution's
//! scope (8) and token (16, [`super::token`]), the task index (4), the
//! stage's task count (4) and the build rows the task saw (8), then the
//! partial's filter message or the failure as UTF-8. A fetch's body is the
//! filter id, the scope and the token (kind 1), and so is an
//! acknowledgement's (kind 1: read, kind 2: not readable). A unit's body is the filter
//! message (docs/FORMAT.md § 12), or the reason as UTF-8. In a frame of
//! kind 3 the filter message comes after the build keys' bounds: their
//! length (4) and their bytes ([`KeyBounds::encode`], at most
//! [`MAX_BOUNDS_BYTES`]). The body length
//! is checked against the bytes present before anything is sliced, and a
//! frame is at most [`MAX_FRAME_BYTES`]; [`peek_post`] reads a post's fixed
//! head alone, so that the rendezvous checks the token and the scope's cap
//! before the body is looked at or copied.
//!
//! Version 2 (no bounds) is read as ever, its filters without bounds.
//! Version 1 (no token) is not read: frames live only while one query runs,
//! between processes of one build.

use super::token::{RunKey, Token};
use super::{Delivery, FilterId, PartialBody, Post};
use crate::runtime::bounds::{KeyBounds, MAX_BOUNDS_BYTES};
use std::sync::Arc;

const UNIT: &[u8; 4] = b"FSRU";
const POST: &[u8; 4] = b"FSRP";
const FETCH: &[u8; 4] = b"FSRQ";
const ACK: &[u8; 4] = b"FSRA";
const VERSION: u8 = 3;
/// The oldest version read.
const OLDEST: u8 = 2;
const KIND_MESSAGE: u8 = 1;
const KIND_NONE: u8 = 2;
/// Bounds, then the filter message (version 3).
const KIND_BOUNDED: u8 = 3;
/// A frame's header: magic, version, kind, reserved, body length.
pub(super) const HEAD: usize = 12;
/// A post's fixed head: filter id, scope, token, task, tasks, rows.
pub(super) const POST_HEAD: usize = 56;
const FETCH_BODY: usize = 40;

/// The largest frame read: a filter message of the largest partial the
/// codec accepts (1 GiB of bits), with room for the headers.
pub(super) const MAX_FRAME_BYTES: usize = (1 << 30) + 4096;

/// Why a frame was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub(super) enum FrameError {
    /// Fewer bytes than the header or the body length says.
    #[error("runtime-filter frame truncated: {needed} bytes needed, {got} present")]
    Truncated {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// Not a frame of this kind.
    #[error("not a runtime-filter {0} frame (bad magic)")]
    Magic(&'static str),
    /// A version this build does not read.
    #[error("runtime-filter frame version {0}, this build reads 2 and 3: run one filterstore-datafusion build on the coordinator and every worker")]
    Version(u8),
    /// Unknown kind or non-zero reserved bytes.
    #[error("runtime-filter frame with kind {kind} and reserved bytes {reserved:#06x}")]
    Header {
        /// The kind byte.
        kind: u8,
        /// The reserved bytes.
        reserved: u16,
    },
    /// The checksum does not match.
    #[error("runtime-filter frame checksum mismatch")]
    Checksum,
    /// More bytes than the body length says.
    #[error("{0} trailing bytes after a runtime-filter frame")]
    Trailing(usize),
    /// A reason that is not UTF-8.
    #[error("a runtime-filter frame's reason is not UTF-8")]
    Utf8,
    /// A frame over [`MAX_FRAME_BYTES`].
    #[error("a runtime-filter frame of {0} bytes")]
    TooLarge(usize),
    /// Bounds that do not decode.
    #[error("a runtime-filter frame's bounds: {0}")]
    Bounds(String),
}

fn encode(magic: &[u8; 4], kind: u8, parts: &[&[u8]]) -> Vec<u8> {
    let n: usize = parts.iter().map(|p| p.len()).sum();
    let mut out = Vec::with_capacity(HEAD + n + 4);
    out.extend_from_slice(magic);
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&[0, 0]);
    // A body over 4 GiB cannot be framed; MAX_FRAME_BYTES keeps far below.
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
    for p in parts {
        out.extend_from_slice(p);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// (kind, body) of a frame with `magic`.
fn decode<'a>(
    bytes: &'a [u8],
    magic: &[u8; 4],
    what: &'static str,
) -> Result<(u8, &'a [u8]), FrameError> {
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(bytes.len()));
    }
    if bytes.len() < HEAD + 4 {
        return Err(FrameError::Truncated {
            needed: HEAD + 4,
            got: bytes.len(),
        });
    }
    let (kind, n) = check_header(bytes, magic, what)?;
    let end = HEAD.saturating_add(n);
    let needed = end.saturating_add(4);
    if bytes.len() < needed {
        return Err(FrameError::Truncated {
            needed,
            got: bytes.len(),
        });
    }
    if bytes.len() > needed {
        return Err(FrameError::Trailing(bytes.len() - needed));
    }
    let crc = u32::from_le_bytes([bytes[end], bytes[end + 1], bytes[end + 2], bytes[end + 3]]);
    if crc32fast::hash(&bytes[..end]) != crc {
        return Err(FrameError::Checksum);
    }
    Ok((kind, &bytes[HEAD..end]))
}

/// (kind, body length) of the [`HEAD`] bytes at the start of `bytes` (at
/// least that many: the caller checks).
fn check_header(
    bytes: &[u8],
    magic: &[u8; 4],
    what: &'static str,
) -> Result<(u8, usize), FrameError> {
    if &bytes[..4] != magic {
        return Err(FrameError::Magic(what));
    }
    let version = bytes[4];
    if !(OLDEST..=VERSION).contains(&version) {
        return Err(FrameError::Version(version));
    }
    let kind = bytes[5];
    let reserved = u16::from_le_bytes([bytes[6], bytes[7]]);
    let bounded = kind == KIND_BOUNDED && version >= 3;
    if reserved != 0 || !(kind == KIND_MESSAGE || kind == KIND_NONE || bounded) {
        return Err(FrameError::Header { kind, reserved });
    }
    Ok((
        kind,
        u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
    ))
}

fn utf8(bytes: &[u8]) -> Result<String, FrameError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| FrameError::Utf8)
}

/// The encoded bounds (with their length) of `bounds`, if they encode
/// within [`MAX_BOUNDS_BYTES`].
fn bounds_part(bounds: Option<&KeyBounds>) -> Option<Vec<u8>> {
    let b = bounds?.encode()?;
    let mut out = Vec::with_capacity(4 + b.len());
    out.extend_from_slice(&u32::try_from(b.len()).ok()?.to_le_bytes());
    out.extend_from_slice(&b);
    Some(out)
}

/// The bounds at the start of a kind-3 body, and the rest.
fn split_bounds(body: &[u8]) -> Result<(KeyBounds, &[u8]), FrameError> {
    let truncated =
        |needed| FrameError::Bounds(format!("{needed} bytes needed, {} present", body.len()));
    let len = body.get(..4).ok_or_else(|| truncated(4))?;
    let n = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if n > MAX_BOUNDS_BYTES {
        return Err(FrameError::Bounds(format!("{n} bytes of bounds")));
    }
    let b = body.get(4..4 + n).ok_or_else(|| truncated(4 + n))?;
    let bounds = KeyBounds::decode(b).map_err(FrameError::Bounds)?;
    Ok((bounds, &body[4 + n..]))
}

/// The unit frame of `delivery`.
pub(super) fn encode_unit(delivery: &Delivery) -> Vec<u8> {
    match delivery {
        Delivery::Message(m, bounds) => match bounds_part(bounds.as_deref()) {
            Some(b) => encode(UNIT, KIND_BOUNDED, &[&b, m]),
            None => encode(UNIT, KIND_MESSAGE, &[m]),
        },
        Delivery::PassAll(why) => encode(UNIT, KIND_NONE, &[why.as_bytes()]),
    }
}

/// The delivery a unit frame carries.
pub(super) fn decode_unit(bytes: &[u8]) -> Result<Delivery, FrameError> {
    let (kind, body) = decode(bytes, UNIT, "unit")?;
    Ok(match kind {
        KIND_MESSAGE => Delivery::Message(Arc::new(body.to_vec()), None),
        KIND_BOUNDED => {
            let (bounds, m) = split_bounds(body)?;
            Delivery::Message(Arc::new(m.to_vec()), Some(Arc::new(bounds)))
        }
        _ => Delivery::PassAll(utf8(body)?),
    })
}

/// The post frame of one task's partial (as a filter message) or failure.
/// A `PartialBody::Filter` or `Halved` must be encoded by the caller first:
/// it is refused here (`None`).
pub(crate) fn encode_post(id: FilterId, key: RunKey, post: &Post) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(POST_HEAD);
    head.extend_from_slice(&id.to_le_bytes());
    head.extend_from_slice(&key.scope.to_le_bytes());
    head.extend_from_slice(&key.token);
    head.extend_from_slice(&u32::try_from(post.task).ok()?.to_le_bytes());
    head.extend_from_slice(&u32::try_from(post.tasks).ok()?.to_le_bytes());
    head.extend_from_slice(&post.rows.to_le_bytes());
    Some(match &post.body {
        PartialBody::Message(m) => match bounds_part(post.bounds.as_ref()) {
            Some(b) => encode(POST, KIND_BOUNDED, &[&head, &b, m]),
            None => encode(POST, KIND_MESSAGE, &[&head, m]),
        },
        PartialBody::Failed(why) => encode(POST, KIND_NONE, &[&head, why.as_bytes()]),
        PartialBody::Filter(_) | PartialBody::Halved { .. } => return None,
    })
}

/// What a post frame says before its body: enough to find its run, check
/// its token and its size against the scope's cap.
#[derive(Debug, PartialEq)]
pub(super) struct PostHead {
    /// The filter posted to.
    pub(super) id: FilterId,
    /// The execution's scope and the token the post carries.
    pub(super) key: RunKey,
    /// The body length the frame declares (the fixed head included), not
    /// yet checked against the bytes present.
    pub(super) body_len: usize,
}

/// The head of a post frame: its header and the fixed head of its body
/// (the first [`HEAD`] + [`POST_HEAD`] bytes), nothing past them read,
/// nothing allocated. The whole frame is checked by [`decode_post`].
pub(super) fn peek_post(bytes: &[u8]) -> Result<PostHead, FrameError> {
    let needed = HEAD + POST_HEAD;
    let Some(head) = bytes.get(..needed) else {
        return Err(FrameError::Truncated {
            needed: needed + 4,
            got: bytes.len(),
        });
    };
    let (_, body_len) = check_header(head, POST, "post")?;
    let (id, key) = id_key(&head[HEAD..]);
    Ok(PostHead { id, key, body_len })
}

/// The filter id, run key and post of a post frame.
pub(super) fn decode_post(bytes: &[u8]) -> Result<(FilterId, RunKey, Post), FrameError> {
    let (kind, body) = decode(bytes, POST, "post")?;
    if body.len() < POST_HEAD {
        return Err(FrameError::Truncated {
            needed: HEAD + POST_HEAD + 4,
            got: bytes.len(),
        });
    }
    let (head, rest) = body.split_at(POST_HEAD);
    let (id, key) = id_key(head);
    let u32_at = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
    let mut rows = [0u8; 8];
    rows.copy_from_slice(&head[48..56]);
    let (bounds, body) = match kind {
        KIND_MESSAGE => (None, PartialBody::Message(rest.to_vec())),
        KIND_BOUNDED => {
            let (bounds, m) = split_bounds(rest)?;
            (Some(bounds), PartialBody::Message(m.to_vec()))
        }
        _ => (None, PartialBody::Failed(utf8(rest)?)),
    };
    Ok((
        id,
        key,
        Post {
            task: u32_at(40) as usize,
            tasks: u32_at(44) as usize,
            rows: u64::from_le_bytes(rows),
            bounds,
            body,
        },
    ))
}

/// The id, scope and token at the start of a post's or fetch's body (40
/// bytes; the caller has checked they are there).
fn id_key(body: &[u8]) -> (FilterId, RunKey) {
    let mut id = [0u8; 16];
    id.copy_from_slice(&body[..16]);
    let mut scope = [0u8; 8];
    scope.copy_from_slice(&body[16..24]);
    let mut token = Token::default();
    token.copy_from_slice(&body[24..40]);
    let key = RunKey {
        scope: u64::from_le_bytes(scope),
        token,
    };
    (u128::from_le_bytes(id), key)
}

/// The fetch frame of filter `id`'s run of `key`.
pub(super) fn encode_fetch(id: FilterId, key: RunKey) -> Vec<u8> {
    encode(
        FETCH,
        KIND_MESSAGE,
        &[&id.to_le_bytes(), &key.scope.to_le_bytes(), &key.token],
    )
}

/// The acknowledgement frame of filter `id`'s run of `key`: its probe task
/// received the filter, and could (`readable`) or could not read it.
pub(super) fn encode_ack(id: FilterId, key: RunKey, readable: bool) -> Vec<u8> {
    let kind = if readable { KIND_MESSAGE } else { KIND_NONE };
    encode(
        ACK,
        kind,
        &[&id.to_le_bytes(), &key.scope.to_le_bytes(), &key.token],
    )
}

/// The filter id, run key and readability of an acknowledgement frame.
pub(super) fn decode_ack(bytes: &[u8]) -> Result<(FilterId, RunKey, bool), FrameError> {
    let (kind, body) = decode(bytes, ACK, "acknowledgement")?;
    if bytes[4] < 3 || kind == KIND_BOUNDED {
        return Err(FrameError::Header { kind, reserved: 0 });
    }
    if body.len() != FETCH_BODY {
        return Err(FrameError::Truncated {
            needed: HEAD + FETCH_BODY + 4,
            got: bytes.len(),
        });
    }
    let (id, key) = id_key(body);
    Ok((id, key, kind == KIND_MESSAGE))
}

/// The filter id and run key of a fetch frame.
pub(super) fn decode_fetch(bytes: &[u8]) -> Result<(FilterId, RunKey), FrameError> {
    let (kind, body) = decode(bytes, FETCH, "fetch")?;
    if kind != KIND_MESSAGE {
        return Err(FrameError::Header { kind, reserved: 0 });
    }
    if body.len() != FETCH_BODY {
        return Err(FrameError::Truncated {
            needed: HEAD + FETCH_BODY + 4,
            got: bytes.len(),
        });
    }
    Ok(id_key(body))
}
