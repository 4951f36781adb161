//! What the rendezvous checks before a frame from another process touches a
//! run (see the module documentation of [`super`]). First the request's
//! headers ([`admit_request`]: its filter, run and token, in a gRPC
//! metadata entry), before the transport reads or buffers its body; then
//! the frame: the filter, the run its scope names, the token, and for a
//! post the size its slot allows, all from the frame's fixed head, before
//! its body is read or copied.

use super::frame::{decode_ack, decode_fetch, decode_post, peek_post, FrameError, PostHead};
use super::{lookup, max_post_body, Decided, FilterId, Post, Run, RunKey, Slot};
use std::sync::Arc;
use tokio::sync::watch;

/// Why a post or fetch from another process was refused.
#[derive(Debug, PartialEq)]
pub(super) enum Refusal {
    /// The frame is damaged, truncated or of another version.
    Frame(FrameError),
    /// No live plan of this process has the filter (its query ended, or a
    /// stray frame).
    UnknownFilter,
    /// The filter has no run of the frame's scope (another query's frame,
    /// or an execution long ended).
    UnknownRun,
    /// The token is not the run's.
    Token,
    /// The post's body is larger than the filter its slot expects.
    TooLarge {
        /// Body bytes the frame declares.
        declared: usize,
        /// The most the slot takes.
        cap: usize,
    },
    /// The post's task had already posted: a replay, idempotent (see
    /// [`Slot::take`]); it decided nothing.
    Taken(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Frame(e) => write!(f, "{e}"),
            Refusal::UnknownFilter => write!(f, "no such runtime filter on the coordinator"),
            Refusal::UnknownRun => write!(f, "no such execution of the runtime filter"),
            Refusal::Token => write!(f, "no token, or not its execution's"),
            Refusal::TooLarge { declared, cap } => write!(
                f,
                "a post body of {declared} bytes, over the {cap} its filter can take"
            ),
            Refusal::Taken(task) => write!(
                f,
                "build task {task} has already posted (a replay decides nothing)"
            ),
        }
    }
}

/// The gRPC metadata entry naming a request's filter and run: the filter
/// id, the scope and the token in lowercase hex (32 + 16 + 32 characters).
pub(super) const RUN_HEADER: &str = "x-filterstore-run";

/// The value of [`RUN_HEADER`] for filter `id`'s run of `key`.
pub(super) fn run_header(id: FilterId, key: RunKey) -> String {
    use std::fmt::Write;
    let mut s = format!("{id:032x}{:016x}", key.scope);
    for b in key.token {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn parse_run_header(v: &str) -> Option<(FilterId, RunKey)> {
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    if v.len() != 80 || !hex(v) {
        return None;
    }
    let id = u128::from_str_radix(&v[..32], 16).ok()?;
    let scope = u64::from_str_radix(&v[32..48], 16).ok()?;
    let mut token = [0u8; 16];
    for (i, t) in token.iter_mut().enumerate() {
        *t = u8::from_str_radix(&v[48 + 2 * i..50 + 2 * i], 16).ok()?;
    }
    Some((id, RunKey { scope, token }))
}

/// Whether a request whose [`RUN_HEADER`] is `header` may be read: it
/// names a live filter and a run of it, with that run's token. Called on
/// the request's headers, before the transport reads or buffers its body
/// (a peer without the token cannot make the coordinator allocate for
/// it); a refusal for a known filter is counted on its slot.
pub(super) fn admit_request(header: Option<&str>) -> Result<(), Refusal> {
    let (id, key) = header.and_then(parse_run_header).ok_or(Refusal::Token)?;
    let slot = lookup(id).ok_or(Refusal::UnknownFilter)?;
    if slot.find(key.scope).is_some_and(|r| r.admits(&key.token)) {
        return Ok(());
    }
    slot.note_refused();
    Err(Refusal::Token)
}

/// The slot, run and post of a post frame, once the frame has shown it
/// belongs there: its header, then its filter's slot, its scope's run and
/// its token, then its declared size against the slot's cap, and only then
/// the whole frame (checksum, body copied). A refusal after the slot is
/// found is counted on the slot.
pub(super) fn admit_post(bytes: &[u8]) -> Result<(Arc<Slot>, Arc<Run>, Post), Refusal> {
    let head = peek_post(bytes).map_err(Refusal::Frame)?;
    let slot = lookup(head.id).ok_or(Refusal::UnknownFilter)?;
    match check_post(&slot, &head, bytes) {
        Ok((run, post)) => Ok((slot, run, post)),
        Err(r) => {
            slot.note_refused();
            Err(r)
        }
    }
}

/// [`admit_post`] once the slot is found.
fn check_post(slot: &Slot, head: &PostHead, bytes: &[u8]) -> Result<(Arc<Run>, Post), Refusal> {
    let run = slot.find(head.key.scope).ok_or(Refusal::UnknownRun)?;
    if !run.admits(&head.key.token) {
        return Err(Refusal::Token);
    }
    let cap = max_post_body(slot.params());
    if head.body_len > cap {
        return Err(Refusal::TooLarge {
            declared: head.body_len,
            cap,
        });
    }
    let (_, _, post) = decode_post(bytes).map_err(Refusal::Frame)?;
    Ok((run, post))
}

/// What a fetch frame may wait on: `Ok(None)` when no live plan has the
/// filter (the probe task passes every row); a refusal, counted on the
/// slot, when the run is unknown or the token is not its own. The receiver
/// does not keep the run alive (a dropped plan closes it).
pub(super) fn admit_fetch(bytes: &[u8]) -> Result<Option<watch::Receiver<Decided>>, Refusal> {
    let (id, key) = decode_fetch(bytes).map_err(Refusal::Frame)?;
    let Some(slot) = lookup(id) else {
        return Ok(None);
    };
    let refused = match slot.find(key.scope) {
        Some(run) if run.admits(&key.token) => return Ok(Some(run.decided.subscribe())),
        Some(_) => Refusal::Token,
        None => Refusal::UnknownRun,
    };
    slot.note_refused();
    Err(refused)
}

/// The run an acknowledgement frame counts in, and whether its probe task
/// read the filter; a refusal, counted on the slot, when the run is unknown
/// or the token is not its own. `Ok(None)`: no live plan has the filter
/// (its query ended): nothing to count.
pub(super) fn admit_ack(bytes: &[u8]) -> Result<Option<(Arc<Run>, bool)>, Refusal> {
    let (id, key, readable) = decode_ack(bytes).map_err(Refusal::Frame)?;
    let Some(slot) = lookup(id) else {
        return Ok(None);
    };
    let refused = match slot.find(key.scope) {
        Some(run) if run.admits(&key.token) => return Ok(Some((run, readable))),
        Some(_) => Refusal::Token,
        None => Refusal::UnknownRun,
    };
    slot.note_refused();
    Err(refused)
}
