//! Where a join's build side and its probe side meet at execution time.
//!
//! A runtime filter is planned as two kinds of node that run in different
//! stages, usually on different workers: a tap ([`super::tap::BloomTapExec`])
//! on the join's build input, in every task of the join's stage, and one or
//! more probe nodes ([`super::exec::BloomFilterExec`]) below the probe side's
//! shuffle. They meet here, on the coordinator, in the filter's [`Slot`]:
//!
//! 1. each tap task, when every partition of its build input has ended,
//!    posts its partial filter (one fixed shape for every task, so partials
//!    merge by OR) with its task index and the stage's task count;
//! 2. the slot ORs the partials; when every task of the stage has posted it
//!    decides once, from the merged filter, whether the filter is worth
//!    shipping ([`SlotPolicy`]), and encodes it as the project's compressed
//!    filter message;
//! 3. each probe task fetches that message (or "pass every row" and why)
//!    once, from when the task starts, on a thread of the rendezvous's own
//!    ([`io`]), and sets it into the task's scans as soon as it comes; the
//!    task's partitions wait for it at most its deadline;
//! 4. a probe task that received a filter acknowledges it, saying whether it
//!    could read it: a filter no probe task has received is reported as
//!    [`FilterOutcome::Undelivered`], never as built.
//!
//! Taps and probes in the coordinator's process use the slot directly;
//! those in worker processes post and fetch through [`service`] (Arrow
//! Flight actions on a port of the coordinator, its address in the plan),
//! on that thread too.
//!
//! **Executions.** A physical plan may run more than once (a cached plan);
//! each run has keys of its own. Each execution gets a fresh *scope*
//! ([`super::scope::BloomQueryExec`] sets it before the plan is sent to
//! workers, and the nodes carry it in their bytes), and a slot keeps one
//! [`Run`] per scope: a post or fetch of one execution never meets another's.
//!
//! **Who may post.** Each execution also draws a secret token
//! ([`token`]), carried with its scope in the task plans; a post or fetch
//! from another process is taken only when it names a run that exists and
//! carries that run's token (compared in constant time), and a post only
//! when its frame is no larger than the filter its slot expects
//! ([`max_post_body`]), checked before its body is read. Anything else is
//! refused and counted ([`Slot::refused_posts`],
//! [`RendezvousServer::stats`]), and changes nothing. A task index is taken
//! once: a second post for it (a replay) decides nothing and is counted; its
//! partial is OR-ed in if the run has not decided (idempotent: a replay
//! adds no key, a task run again adds only its own, none is ever lost) and
//! ignored once it has.
//!
//! Nothing here can drop a row that joins: a run that cannot account for
//! every task's keys (a failed or cancelled task, partials of another
//! shape, an inconsistent task count) ends as [`FilterOutcome::PassAll`],
//! and so does a run whose query ended or whose plan was dropped: every
//! waiting probe task then passes every row.

mod admit;
mod frame;
mod io;
mod merge;
mod outcome;
mod service;
mod token;

pub(super) use frame::encode_post;
pub(super) use io::spawn;
pub use outcome::FilterOutcome;
pub(crate) use service::incoming_nodelay;
pub(super) use service::{acknowledge_remote, fetch_remote, post_remote};
pub use service::{RendezvousServer, RendezvousStats};
pub(super) use token::RunKey;

pub(super) use merge::fits_plan;
use merge::{fit, judged, Part};

use super::bounds::KeyBounds;

use filterstore::{
    encode_message, BitFilter, BloomRead, CodecChoice, FilterParams, BUILD_STATS_LEN,
    MESSAGE_OVERHEAD,
};
use parking_lot::Mutex;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock, Weak};
use std::time::Instant;
use tokio::sync::watch;

/// The most tasks one stage may report (a count read from a post is checked
/// against it before anything is sized by it).
pub(super) const MAX_TASKS: usize = 1 << 16;

/// A filter's identity: random, so that a stray or hostile post names no
/// slot (and a post can only ever add keys or end the slot as pass-all).
pub(super) type FilterId = u128;

/// A fresh, random filter id.
pub(super) fn new_filter_id() -> FilterId {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEYS: LazyLock<(RandomState, RandomState)> =
        LazyLock::new(|| (RandomState::new(), RandomState::new()));
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let half = |s: &RandomState| {
        let mut h = s.build_hasher();
        h.write_u64(n);
        h.finish()
    };
    (u128::from(half(&KEYS.0)) << 64) | u128::from(half(&KEYS.1))
}

/// When a merged filter is shipped rather than replaced by "pass every row".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlotPolicy {
    /// A merged filter whose false-positive rate (from its fill) is above
    /// this passes every row instead.
    pub max_fp: f64,
    /// A merged filter expected to keep more than this share of the probe
    /// side's rows passes every row instead (needs `probe_distinct`).
    pub max_pass: f64,
    /// An upper bound of the probe key's distinct values, from statistics.
    pub probe_distinct: Option<f64>,
    /// Ship every filter, whatever it costs (tests, measurements).
    pub force: bool,
    /// Halve the merged filter before it ships, while its rate (from its
    /// fill) stays at or under this and its block count is even: a filter
    /// planned from estimates that ran high ships, and is probed, at the
    /// size of the keys it holds. `None`: it ships at its planned size.
    pub fit_fp: Option<f64>,
}

/// What a probe task receives: the filter's message, or why there is none.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Delivery {
    /// The compressed filter message, and the build keys' bounds when every
    /// build task sent them.
    Message(Arc<Vec<u8>>, Option<Arc<KeyBounds>>),
    /// Pass every row, and why.
    PassAll(String),
}

/// One tap task's contribution.
pub enum PartialBody {
    /// The task's filter, in this process (no encoding).
    Filter(Arc<BitFilter>),
    /// The task's filter, in this process, halved before it posts (the
    /// tap's partial fit); `keys`: its distinct keys as the tap estimated
    /// them at the planned size, as a halved partial's message carries them.
    Halved { filter: Arc<BitFilter>, keys: u64 },
    /// The task's filter as a filter message (from another process).
    Message(Vec<u8>),
    /// The task's build input failed or was cancelled: its keys are unknown.
    Failed(String),
}

/// A post from one task of the join's stage.
pub struct Post {
    /// The task's index in its stage.
    pub task: usize,
    /// Tasks in the stage.
    pub tasks: usize,
    /// Build rows the task saw (null keys excluded).
    pub rows: u64,
    /// The bounds of the task's keys, if it has them.
    pub(crate) bounds: Option<KeyBounds>,
    /// The partial filter, or the failure.
    pub body: PartialBody,
}

/// An execution's scope (see the module documentation).
pub(super) type Scope = u64;

/// Scopes a slot remembers; an older one's waiters pass every row.
const SCOPES_KEPT: usize = 4;

/// The meeting point of one runtime filter (see the module documentation).
#[derive(Debug)]
pub struct Slot {
    id: FilterId,
    params: FilterParams,
    policy: SlotPolicy,
    runs: Mutex<Vec<(Scope, Arc<Run>)>>,
    /// Posts and fetches refused (see the module documentation).
    refused: AtomicU64,
}

/// What a run decided: the outcome, and what probe tasks receive.
pub(super) type Decided = Option<(FilterOutcome, Delivery)>;

/// One execution's merge.
#[derive(Debug)]
pub struct Run {
    state: Mutex<State>,
    decided: watch::Sender<Decided>,
    /// The execution's token, set when [`BloomQueryExec`](super::scope::BloomQueryExec)
    /// opens the run; a run without one takes no frame from another process.
    token: OnceLock<token::Token>,
    /// Probe tasks that received the filter and read it, and that could not.
    received: AtomicU64,
    unreadable: AtomicU64,
}

#[derive(Debug)]
struct State {
    started: Instant,
    expected: Option<usize>,
    posted: Vec<bool>,
    merged: Option<BitFilter>,
    /// The tasks' bounds widened into one; `None` once a task had none.
    bounds: Option<KeyBounds>,
    bounds_lost: bool,
    rows: u64,
    /// The partials' own key estimates, summed.
    keys: f64,
    /// Whether a partial came halved (spread over the planned size).
    halved: bool,
    done: bool,
}

static SLOTS: LazyLock<Mutex<HashMap<FilterId, Weak<Slot>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The slot of `id` in this process, if its plan is still alive.
pub(super) fn lookup(id: FilterId) -> Option<Arc<Slot>> {
    SLOTS.lock().get(&id).and_then(Weak::upgrade)
}

/// Posts to filter `id`'s run of `scope` in this process; `false` when no
/// live plan of this process has that filter (the post is dropped: a probe
/// side without its filter passes every row).
pub(super) fn post_local(id: FilterId, scope: Scope, post: Post) -> bool {
    match lookup(id) {
        Some(slot) => {
            let run = slot.run(scope);
            slot.take(&run, post);
            true
        }
        None => false,
    }
}

/// The most bytes a post's body (its fixed head included) may have for a
/// filter of `params`: the head, the largest bounds, and the filter's
/// message written plain with build statistics (an entropy-coded message is never larger, and a
/// failure's reason is far shorter). A larger post is refused before its
/// body is read.
pub(super) fn max_post_body(params: &FilterParams) -> usize {
    let bits = usize::try_from(params.bit_bytes()).unwrap_or(usize::MAX);
    frame::POST_HEAD
        .saturating_add(4 + super::bounds::MAX_BOUNDS_BYTES)
        .saturating_add(MESSAGE_OVERHEAD + BUILD_STATS_LEN)
        .saturating_add(bits)
}

/// What filter `id`'s run of `scope` decides, as a receiver that does not
/// keep the slot alive: when the plan is dropped it closes, and a waiter
/// passes every row. `None` when this process has no such filter.
pub(super) fn subscribe(id: FilterId, scope: Scope) -> Option<watch::Receiver<Decided>> {
    lookup(id).map(|slot| slot.run(scope).decided.subscribe())
}

/// A probe task of this process received filter `id`'s run of `scope` and
/// could, or could not, read it.
pub(super) fn acknowledge_local(id: FilterId, scope: Scope, readable: bool) {
    if let Some(run) = lookup(id).and_then(|s| s.find(scope)) {
        run.acknowledge(readable);
    }
}

/// Waits for what `rx` decides; "pass every row" if its plan is dropped.
pub(super) async fn delivery(mut rx: watch::Receiver<Decided>) -> Delivery {
    match rx.wait_for(Option::is_some).await {
        Ok(d) => d
            .as_ref()
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| Delivery::PassAll("no filter".into())),
        Err(_) => Delivery::PassAll("the query ended before the filter was ready".into()),
    }
}

impl Slot {
    /// A new slot, registered in this process for as long as the returned
    /// `Arc` (held by the coordinator's plan) lives.
    pub fn register(id: FilterId, params: FilterParams, policy: SlotPolicy) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            id,
            params,
            policy,
            runs: Mutex::new(Vec::new()),
            refused: AtomicU64::new(0),
        });
        let mut slots = SLOTS.lock();
        slots.retain(|_, w| w.strong_count() > 0);
        slots.insert(id, Arc::downgrade(&slot));
        slot
    }

    /// The filter's id.
    pub fn id(&self) -> FilterId {
        self.id
    }

    /// The shape every partial must have.
    pub fn params(&self) -> &FilterParams {
        &self.params
    }

    /// The run of `scope`, created on first use (the oldest of more than
    /// [`SCOPES_KEPT`] is forgotten, and its waiters pass every row).
    pub fn run(&self, scope: Scope) -> Arc<Run> {
        let mut runs = self.runs.lock();
        if let Some((_, r)) = runs.iter().find(|(s, _)| *s == scope) {
            return Arc::clone(r);
        }
        let (decided, _) = watch::channel(None);
        let run = Arc::new(Run {
            state: Mutex::new(State {
                started: Instant::now(),
                expected: None,
                posted: Vec::new(),
                merged: None,
                bounds: None,
                bounds_lost: false,
                rows: 0,
                keys: 0.0,
                halved: false,
                done: false,
            }),
            decided,
            token: OnceLock::new(),
            received: AtomicU64::new(0),
            unreadable: AtomicU64::new(0),
        });
        runs.push((scope, Arc::clone(&run)));
        if runs.len() > SCOPES_KEPT {
            let (_, old) = runs.remove(0);
            old.pass_all("a later execution of the plan replaced this one".into());
        }
        run
    }

    /// The run of `key`'s scope, created on first use, that takes frames
    /// from other processes carrying `key`'s token (the first token given
    /// to a run stays).
    pub(crate) fn open(&self, key: RunKey) -> Arc<Run> {
        let run = self.run(key.scope);
        let _ = run.token.set(key.token);
        run
    }

    /// The run of `scope`, if there is one (never creates it).
    pub(super) fn find(&self, scope: Scope) -> Option<Arc<Run>> {
        let runs = self.runs.lock();
        runs.iter()
            .find(|(s, _)| *s == scope)
            .map(|(_, r)| Arc::clone(r))
    }

    /// Takes `post` into `run`; `false` (and counted) when its task had
    /// already posted: a replay, OR-ed in before the run decides (adding no
    /// key it does not hold) and ignored after; it decides nothing.
    pub(super) fn take(&self, run: &Run, post: Post) -> bool {
        let taken = run.post(&self.params, self.policy, post);
        if !taken {
            self.note_refused();
        }
        taken
    }

    /// Counts one refused post or fetch.
    pub(super) fn note_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Posts and fetches refused so far, over every execution: a wrong or
    /// missing token, an unknown scope, a frame over the filter's size or
    /// unreadable, or a task that had already posted.
    pub fn refused_posts(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The outcome of the latest execution, once decided; a built filter
    /// that no probe task has received yet is [`FilterOutcome::Undelivered`].
    pub fn outcome(&self) -> Option<FilterOutcome> {
        let runs = self.runs.lock();
        let (_, run) = runs.last()?;
        let decided = run.decided.borrow();
        let received = run.received.load(Ordering::Acquire);
        let unreadable = run.unreadable.load(Ordering::Acquire);
        decided
            .as_ref()
            .map(|(o, _)| o.clone().into_delivered(received, unreadable))
    }

    /// Ends `scope`'s run as pass-all if it is not decided (its query ended
    /// or was cancelled: any probe task still waiting stops waiting).
    pub fn close(&self, scope: Scope) {
        if let Some(run) = self.find(scope) {
            run.pass_all("the query ended before the filter was ready".into());
        }
    }
}

impl Run {
    /// A probe task received the run's filter and could, or could not,
    /// read it.
    pub(super) fn acknowledge(&self, readable: bool) {
        let n = if readable {
            &self.received
        } else {
            &self.unreadable
        };
        n.fetch_add(1, Ordering::AcqRel);
    }

    /// Ends the run as pass-all (a no-op once decided).
    pub fn pass_all(&self, reason: String) {
        let mut s = self.state.lock();
        if s.done {
            return;
        }
        s.done = true;
        s.merged = None;
        let after = s.started.elapsed();
        let outcome = FilterOutcome::PassAll {
            reason: reason.clone(),
            after,
        };
        self.decided
            .send_replace(Some((outcome, Delivery::PassAll(reason))));
    }

    /// Whether a frame carrying `token` comes from this run's execution
    /// (constant time; never for a run opened without a token).
    pub(super) fn admits(&self, token: &token::Token) -> bool {
        self.token
            .get()
            .is_some_and(|mine| token::tokens_match(mine, token))
    }

    /// Takes one task's post (see the module documentation). Never fails:
    /// anything wrong ends the run as pass-all. `false` when the post was
    /// refused because its task had already posted (the run unchanged).
    pub fn post(&self, params: &FilterParams, policy: SlotPolicy, post: Post) -> bool {
        match self.merge(params, policy, post) {
            Ok(taken) => taken,
            Err(reason) => {
                self.pass_all(reason);
                true
            }
        }
    }

    /// `Ok(false)`: a replay (idempotent, counted); `Err`: the run passes
    /// every row.
    fn merge(&self, params: &FilterParams, policy: SlotPolicy, post: Post) -> Result<bool, String> {
        let Post {
            task,
            tasks,
            rows,
            bounds,
            body,
        } = post;
        if tasks == 0 || tasks > MAX_TASKS || task >= tasks {
            return Err(format!("a post from task {task} of {tasks}"));
        }
        // Decoded before the run's lock: posts decode side by side.
        let (part, own_keys) = Part::new(body, params, task)?;
        let halved = part.filter().params().m() < params.m();
        let mut s = self.state.lock();
        if s.done {
            // Decided: nothing changes it; a task posting again is a replay.
            return Ok(!s.posted.get(task).is_some_and(|&p| p));
        }
        let expected = *s.expected.get_or_insert(tasks);
        if expected != tasks {
            return Err(format!(
                "build tasks disagree on their count ({expected}, {tasks})"
            ));
        }
        if s.posted.is_empty() {
            s.posted = vec![false; tasks];
        }
        // A task index counts once. A second post for it (a replay, or a
        // task run again) is OR-ed in all the same: idempotent for a
        // replay (its keys are already there), and a task run again can
        // only add keys, so no key is ever lost; it decides nothing.
        let replay = std::mem::replace(&mut s.posted[task], true);
        if s.merged.is_none() {
            s.merged = Some(BitFilter::new(*params).map_err(|e| e.to_string())?);
        }
        let merged = s.merged.as_ref().ok_or("no filter")?;
        merged
            .union_with_halved(part.filter())
            .map_err(|e| format!("a partial of another shape: {e}"))?;
        // Bounds only widen, as the filter only gains keys: a replay's too.
        s.widen_bounds(bounds);
        if replay {
            return Ok(false);
        }
        s.rows = s.rows.saturating_add(rows);
        s.keys += own_keys;
        s.halved |= halved;
        if s.posted.iter().all(|&p| p) {
            let filter = s.merged.take().ok_or("no filter")?;
            let bounds = s.bounds.take().filter(|_| !s.bounds_lost);
            let keys = s.halved.then_some(s.keys);
            let (rows, started) = (s.rows, s.started);
            drop(s);
            self.finish((filter, bounds, keys), policy, rows, expected, started);
        }
        Ok(true)
    }

    /// Decides on the merged filter and publishes the outcome;
    /// `halved_keys`: the partials' own key estimates summed, when any
    /// partial came halved.
    fn finish(
        &self,
        (filter, bounds, halved_keys): (BitFilter, Option<KeyBounds>, Option<f64>),
        p: SlotPolicy,
        build_rows: u64,
        partials: usize,
        started: Instant,
    ) {
        let (keys, fp) = judged(&filter, halved_keys);
        // The rate as probed (its fill) or as judged, whichever is higher.
        let full = filter.estimated_fp().max(fp);
        if !p.force && full > p.max_fp {
            let fp = full;
            let why = format!("the merged filter is too full (fp {:.1}%)", fp * 100.0);
            return self.pass_all(why);
        }
        if let (false, Some(d)) = (p.force, p.probe_distinct) {
            let pass = (keys / d.max(1.0)).min(1.0) + fp;
            if pass > p.max_pass {
                let why = format!(
                    "not selective: ~{keys:.0} keys against at most ~{d:.0} distinct probe keys (~{:.0}% would pass)",
                    pass.min(1.0) * 100.0
                );
                return self.pass_all(why);
            }
        }
        let filter = match p.fit_fp {
            Some(target) => fit(filter, target),
            None => filter,
        };
        let fp = filter.estimated_fp();
        let message = match encode_message(&filter, keys.round() as u64, 0, CodecChoice::Auto) {
            Ok(m) => Arc::new(m),
            Err(e) => return self.pass_all(format!("encoding the filter failed: {e}")),
        };
        let mut s = self.state.lock();
        if s.done {
            return;
        }
        s.done = true;
        let outcome = FilterOutcome::Built {
            delivered: 0,
            message_bytes: message.len(),
            keys,
            fp,
            bits: filter.params().m(),
            partials,
            build_rows,
            ready_after: started.elapsed(),
        };
        let bounds = bounds.filter(KeyBounds::any_known).map(Arc::new);
        self.decided
            .send_replace(Some((outcome, Delivery::Message(message, bounds))));
    }
}

impl State {
    fn widen_bounds(&mut self, bounds: Option<KeyBounds>) {
        match (bounds, &mut self.bounds) {
            (None, _) => self.bounds_lost = true,
            (Some(b), None) => self.bounds = Some(b),
            (Some(b), Some(mine)) => mine.widen(&b),
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fitted;
#[cfg(test)]
mod tests_halved;
#[cfg(test)]
mod tests_remote;
