//! Keeping an index current: a refresh lists the files, indexes the new and
//! rewritten ones (and rebuilds old ones when the table has outgrown their
//! rate), drops the filters of files gone, and commits in batches, each
//! batch one pack file and one catalog commit of the store: after a crash
//! (a kill, a power cut) each file is indexed in the version its tag names,
//! or not at all.

use super::build::{build_file, BuildSpec, BuiltFile};
use super::files::{fp_for_new_file, over_budget, IndexedFile};
use super::identity::filter_name;
use super::store::StoreAccess;
use super::table::{list, IndexedParquetTable};
use datafusion::error::{DataFusionError, Result};
use datafusion::object_store::ObjectMeta;
use filterstore::{BloomRead, FilterStore, NewSealed, SealedBatch};
use futures::StreamExt;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// What a refresh did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RefreshReport {
    /// Files listed.
    pub listed: usize,
    /// Files indexed for the first time.
    pub indexed: usize,
    /// Files indexed again: rewritten since, or outgrown by the table.
    pub rebuilt: usize,
    /// Files gone whose filters were dropped.
    pub dropped: usize,
    /// Files whose filters were kept as they were.
    pub unchanged: usize,
    /// Files that could not be indexed (they are read), with why.
    pub failed: Vec<(String, String)>,
    /// Files left for a later refresh: modified too recently
    /// ([`IndexOptions::settle`](super::IndexOptions::settle)).
    pub deferred: usize,
    /// Rows whose keys went into filters.
    pub keys: u64,
    /// Bytes of the filters written.
    pub filter_bytes: u64,
    /// Batches committed to the store.
    pub commits: usize,
    /// How long it took.
    pub elapsed: Duration,
}

impl IndexedParquetTable {
    /// Brings the index up to date with the files listed now (see the
    /// module docs of `refresh.rs`); one refresh at a time per table. An
    /// error leaves every batch committed before it in force; the files it
    /// did not reach are read until the next refresh.
    pub async fn refresh(&self) -> Result<RefreshReport> {
        let i = &self.inner;
        let _one = i.refresh_lock.lock().await;
        let started = Instant::now();
        let store = self.writable_store()?;
        let listed_at = SystemTime::now();
        let listed = list(
            &i.object_store,
            &i.url,
            &i.options.file_extension,
            i.ignore_subdirectory,
        )
        .await?;
        let mut report = RefreshReport {
            listed: listed.len(),
            ..RefreshReport::default()
        };
        let fp = fp_for_new_file(listed.len(), i.options.false_files);
        let settled = listed_at
            .checked_sub(i.options.settle)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let (work, dropped) = self.plan_refresh(&listed, fp, settled, &mut report);
        let spec = BuildSpec {
            columns: i.options.columns.clone(),
            hash: i.hash,
            fp,
            batch_rows: i.options.batch_rows,
        };
        self.build_and_commit(&store, work, spec, dropped, &mut report)
            .await?;
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// The store to refresh into, or why this table's index cannot be
    /// written.
    fn writable_store(&self) -> Result<FilterStore> {
        match self.inner.access.as_ref() {
            StoreAccess::Writable(s) => Ok(s.clone()),
            other => {
                let why = other.limitation().unwrap_or("the index cannot be written");
                Err(DataFusionError::Execution(format!(
                    "cannot refresh the index: {why}"
                )))
            }
        }
    }

    /// Builds the filters of `work`, `concurrency` files at a time, and
    /// commits them (with the drops of `removes`) in batches of
    /// `commit_files`; a file that fails goes into `report.failed`.
    async fn build_and_commit(
        &self,
        store: &FilterStore,
        work: Vec<ObjectMeta>,
        spec: BuildSpec,
        mut removes: Vec<String>,
        report: &mut RefreshReport,
    ) -> Result<()> {
        let i = &self.inner;
        let mut builds = futures::stream::iter(work)
            .map(|meta| {
                let (store, spec) = (Arc::clone(&i.object_store), spec.clone());
                async move {
                    let path = meta.location.to_string();
                    (path, build_file(store, meta, &spec).await)
                }
            })
            .buffer_unordered(i.options.concurrency);
        let mut pending = Vec::new();
        while let Some((path, built)) = builds.next().await {
            match built {
                Ok(b) => pending.push(b),
                Err(e) => report.failed.push((path, e.to_string())),
            }
            if pending.len() >= i.options.commit_files {
                self.commit(store, std::mem::take(&mut pending), &mut removes, report)?;
            }
        }
        if !pending.is_empty() || !removes.is_empty() {
            self.commit(store, pending, &mut removes, report)?;
        }
        Ok(())
    }

    /// The files to build (new, rewritten, outgrown; modified before
    /// `settled`) and the paths whose filters to drop.
    fn plan_refresh(
        &self,
        listed: &[ObjectMeta],
        fp: f64,
        settled: SystemTime,
        report: &mut RefreshReport,
    ) -> (Vec<ObjectMeta>, Vec<String>) {
        let i = &self.inner;
        let files = i.files.read();
        let listed_paths: HashSet<&str> = listed.iter().map(|m| m.location.as_ref()).collect();
        let dropped: Vec<String> = files
            .files
            .keys()
            .filter(|p| !listed_paths.contains(p.as_str()))
            .cloned()
            .collect();
        report.dropped = dropped.len();
        let new: Vec<&ObjectMeta> = listed
            .iter()
            .filter(|m| files.current(m).is_none())
            .collect();
        let room = new.len() as f64 * fp;
        let outgrown: HashSet<String> = over_budget(&files, listed, room, i.options.false_files)
            .into_iter()
            .collect();
        let mut work = Vec::new();
        for m in listed {
            let path = m.location.as_ref();
            let young = SystemTime::from(m.last_modified) > settled;
            if young && (files.current(m).is_none() || outgrown.contains(path)) {
                report.deferred += 1;
            } else if files.current(m).is_none() {
                match files.files.contains_key(path) {
                    true => report.rebuilt += 1,
                    false => report.indexed += 1,
                }
                work.push(m.clone());
            } else if outgrown.contains(path) {
                report.rebuilt += 1;
                work.push(m.clone());
            } else {
                report.unchanged += 1;
            }
        }
        (work, dropped)
    }

    /// Commits `built` (and the filters of `removes`, emptied) as one batch,
    /// then makes the index in memory say what the store now holds.
    fn commit(
        &self,
        store: &FilterStore,
        built: Vec<BuiltFile>,
        removes: &mut Vec<String>,
        report: &mut RefreshReport,
    ) -> Result<()> {
        let i = &self.inner;
        let mut batch = SealedBatch::new();
        let mut kept = Vec::new();
        for b in built {
            let tags: Option<Vec<Vec<u8>>> = i
                .options
                .columns
                .iter()
                .map(|c| b.identity.tag(c))
                .collect();
            let Some(tags) = tags else {
                report.failed.push((
                    b.identity.path.clone(),
                    "its path is too long to index".into(),
                ));
                continue;
            };
            for ((column, tag), (filter, keys)) in i.options.columns.iter().zip(tags).zip(b.filters)
            {
                report.keys += keys;
                report.filter_bytes += filter.params().bit_bytes();
                let name = filter_name(&i.prefix, column, &b.identity.path);
                batch.put(NewSealed::new(name, filter, keys).target_fp(b.fp).tag(tag));
            }
            kept.push(b.identity);
        }
        for path in removes.iter() {
            for column in &i.options.columns {
                batch.remove(filter_name(&i.prefix, column, path));
            }
        }
        let sealed = store
            .commit_sealed(batch)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        report.commits += 1;
        let mut sealed = sealed.into_iter().map(Arc::new);
        let mut files = i.files.write();
        for path in removes.drain(..) {
            files.files.remove(&path);
        }
        for identity in kept {
            let filters = i.options.columns.iter().map(|_| sealed.next()).collect();
            files
                .files
                .insert(identity.path.clone(), IndexedFile { identity, filters });
        }
        Ok(())
    }

    /// Starts a refresh in the background unless one is running, the
    /// table's options say not to, or the index cannot be written. Its
    /// outcome is kept ([`IndexedParquetTable::last_background_refresh`]).
    pub(crate) fn refresh_in_background(&self) {
        let i = &self.inner;
        if !i.options.refresh_on_scan || !matches!(i.access.as_ref(), StoreAccess::Writable(_)) {
            return;
        }
        if i.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let table = self.clone();
        tokio::spawn(async move {
            let outcome = table.refresh().await.map_err(|e| e.to_string());
            if let Err(e) = &outcome {
                log::warn!(
                    "indexed table at {}: a refresh failed: {e}",
                    table.inner.url
                );
            }
            *table.inner.last_background.lock() = Some(outcome);
            table.inner.refreshing.store(false, Ordering::Release);
        });
    }

    /// The outcome of the last refresh a scan started, if one ended.
    pub fn last_background_refresh(&self) -> Option<std::result::Result<RefreshReport, String>> {
        self.inner.last_background.lock().clone()
    }

    /// Whether a refresh a scan started is still running.
    pub fn background_refresh_running(&self) -> bool {
        self.inner.refreshing.load(Ordering::Acquire)
    }
}
