//! What the rendezvous checks before a frame from another process touches a
//! run (see the module documentation of [`super`]): the filter, the run its
//! scope names, the token, and for a post the size its slot allows, all
//! from the frame's fixed head, before its body is read or copied.

use super::frame::{decode_fetch, decode_post, peek_post, FrameError, PostHead};
use super::{lookup, max_post_body, Decided, Post, Run, Slot};
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
    /// The post's task had already posted: a replay, nothing changed.
    Taken(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Frame(e) => write!(f, "{e}"),
            Refusal::UnknownFilter => write!(f, "no such runtime filter on the coordinator"),
            Refusal::UnknownRun => write!(f, "no such execution of the runtime filter"),
            Refusal::Token => write!(f, "the frame's token is not its execution's"),
            Refusal::TooLarge { declared, cap } => write!(
                f,
                "a post body of {declared} bytes, over the {cap} its filter can take"
            ),
            Refusal::Taken(task) => write!(f, "build task {task} has already posted"),
        }
    }
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
