//! The workloads: what the writer does between cuts ([`Workload::run_child`])
//! and where the parent cuts it ([`Workload::plan`]).

use super::child::{Child, Op};
use super::fixture;
use super::model::{Checked, Model, Presence, TableModel, GUARD_TABLE};
use super::{MemFs, Trigger};
use filterstore::{FilterStore, Layout};
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The table most workloads write.
pub const MAIN: &str = "cut";
const MAIN_KEYS: u64 = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Durable and unsynced inserts, flushes, durable removes, folds and
    /// regenerations at random; cut at random moments.
    Mixed,
    /// Six durable inserts and a fold, over and over; cut inside folds.
    Folds,
    /// `Table::bulk_load`s among durable writes; cut inside bulk loads.
    BulkLoad,
    /// `FilterStore::import` of the table's export and `import_counting`
    /// of batches made in memory, drops of imported tables, durable
    /// writes; cut inside imports.
    Import,
    /// `Table::change_layout` through the three layouts among writes;
    /// cut inside layout changes.
    ChangeLayout,
    /// `create_table` and `drop_table` of other tables while the main table
    /// takes durable writes; cut inside creates and drops.
    Tables,
    /// Batches of sealed filters committed and removed (each a pack file
    /// and a catalog-log record) beside durable writes; cut inside them.
    Sealed,
    /// The store-format-2 fixture (with guard storage) migrated on open,
    /// then written; cut inside the migration.
    Migration,
    /// The guard's storage through `Guard`: a base load, writes of 24 keys
    /// (three atomic groups), merges, folds of its table; cut inside them.
    Guard,
    /// The store created in a fresh subdirectory of the mount (two levels
    /// deep in every other chain), so its own directory entry is at risk;
    /// cut during the creation and right after.
    NewStore,
    /// The mixed workload with one failed sync (`MemFs::fail_sync`): the
    /// writer reports errors and goes on; cut a few steps later.
    Eio,
    /// As `Eio`, but after an error the writer reopens the store one time
    /// in two, in the same process (the failed sync's pages still in the
    /// page cache, as after a restart without a reboot).
    EioReopen,
}

/// Where a cut comes.
#[derive(Clone, Copy, Debug)]
pub enum Plan {
    /// At a random moment.
    At(Trigger),
    /// Inside the `nth` run of `stage` in this cut: at a random one of
    /// the filesystem operations its last run took (times `stretch`), or at
    /// a random one of its syncs.
    Inside {
        stage: &'static str,
        nth: usize,
        at_sync: bool,
        stretch: f64,
    },
    /// The `fail`th sync fails with EIO; the power goes `after` lines of
    /// the writer's later.
    Eio { fail: u64, after: usize },
}

impl Workload {
    pub const ALL: [Workload; 12] = [
        Workload::Mixed,
        Workload::Folds,
        Workload::BulkLoad,
        Workload::Import,
        Workload::ChangeLayout,
        Workload::Tables,
        Workload::Sealed,
        Workload::Migration,
        Workload::Guard,
        Workload::NewStore,
        Workload::Eio,
        Workload::EioReopen,
    ];

    /// Its name in `RESULT powercut.<name>.…` lines and in child mode.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Mixed => "mixed",
            Workload::Folds => "folds",
            Workload::BulkLoad => "bulk_load",
            Workload::Import => "import",
            Workload::ChangeLayout => "change_layout",
            Workload::Tables => "tables",
            Workload::Sealed => "sealed",
            Workload::Migration => "migration",
            Workload::Guard => "guard",
            Workload::NewStore => "new_store",
            Workload::Eio => "eio",
            Workload::EioReopen => "eio_reopen",
        }
    }

    pub fn parse(name: &str) -> Workload {
        *Workload::ALL
            .iter()
            .find(|w| w.name() == name)
            .unwrap_or_else(|| panic!("no workload {name}"))
    }

    /// Where the store is, in the mount.
    pub fn store_dir(self, cut: u32) -> PathBuf {
        match self {
            Workload::NewStore if chain_of(cut).is_multiple_of(2) => PathBuf::from("s"),
            Workload::NewStore => PathBuf::from("n/s"),
            _ => PathBuf::new(),
        }
    }

    /// What the workload needs beside the mount (the migration's fixture).
    pub fn prepare(self, work: &Path) -> Option<PathBuf> {
        (self == Workload::Migration).then(|| fixture::prepare(work))
    }

    /// The model at the start of a chain, after loading what the chain
    /// starts from into `fs`.
    pub fn initial(self, fs: &MemFs, prepared: Option<&Path>) -> Model {
        let mut model = Model::default();
        if let Some(dir) = prepared {
            fs.load(dir).unwrap();
            for (name, layout) in fixture::TABLES
                .into_iter()
                .zip([Layout::Blocked, Layout::Standard])
            {
                let t = TableModel {
                    presence: Presence::Present,
                    must: BTreeSet::new(),
                    unflushed: BTreeSet::new(),
                    layouts: vec![layout],
                };
                model.tables.insert(name.into(), t);
            }
        }
        if self == Workload::Guard {
            model.guard = Some(BTreeMap::new());
        }
        model
    }

    /// What the check adds to the model's.
    pub fn extra_check(self, store: &FilterStore, out: &mut Checked) {
        if self == Workload::Migration {
            fixture::check(store, out);
        }
    }

    /// Where cut `cut` comes (`chain_start`: the first of its chain).
    pub fn plan(self, chain_start: bool, rng: &mut StdRng) -> Plan {
        let inside = |stage, rng: &mut StdRng| Plan::Inside {
            stage,
            nth: rng.gen_range(1..=4),
            at_sync: rng.gen_bool(0.5),
            stretch: 1.25,
        };
        let r = rng.gen_range(0..8);
        match self {
            Workload::Mixed => Plan::At(random_trigger(rng)),
            Workload::Folds => inside("fold", rng),
            Workload::BulkLoad if r < 6 => inside("bulk", rng),
            Workload::Import if r < 6 => inside("import", rng),
            Workload::ChangeLayout if r < 6 => inside("relayout", rng),
            Workload::Tables if r < 3 => inside("create", rng),
            Workload::Tables if r < 6 => inside("drop", rng),
            Workload::Sealed if r < 4 => inside("seal", rng),
            Workload::Sealed if r < 6 => inside("unseal", rng),
            Workload::Migration | Workload::NewStore if chain_start && r < 6 => Plan::Inside {
                stage: if self == Workload::NewStore {
                    "setup"
                } else {
                    "open"
                },
                nth: 1,
                at_sync: rng.gen_bool(0.25),
                // The store's creation and the first writes after it.
                stretch: if self == Workload::NewStore {
                    2.0
                } else {
                    1.25
                },
            },
            Workload::Guard if r < 2 => inside("gwrite", rng),
            Workload::Guard if r < 3 => inside("gwrites", rng),
            Workload::Guard if r < 5 => inside("merge", rng),
            Workload::Guard if r < 6 && chain_start => Plan::Inside {
                stage: "base",
                nth: 1,
                at_sync: rng.gen_bool(0.5),
                stretch: 1.25,
            },
            Workload::Eio | Workload::EioReopen => Plan::Eio {
                fail: rng.gen_range(1..=48),
                after: rng.gen_range(0..=16),
            },
            _ => Plan::At(random_trigger(rng)),
        }
    }

    /// The writer of this workload (child mode): writes until killed.
    pub fn run_child(self, c: &mut Child, layout: Layout) {
        if self == Workload::NewStore {
            c.step("setup", "-", "-", |c| {
                c.open();
                c.table(MAIN, layout, MAIN_KEYS);
                Ok(())
            });
        } else if !c.open() {
            c.reopen();
        }
        let reopen = self == Workload::EioReopen;
        loop {
            let table = match self {
                Workload::Migration => fixture::TABLES[c.rng.gen_range(0..2)],
                Workload::Guard => {
                    c.guard_open();
                    GUARD_TABLE
                }
                _ if c.store.is_none() => {
                    c.reopen();
                    continue;
                }
                _ if c.table(MAIN, layout, MAIN_KEYS).is_none() => {
                    if reopen && c.rng.gen_bool(0.5) {
                        c.reopen();
                    }
                    continue;
                }
                _ => MAIN,
            };
            if self == Workload::Folds {
                (0..6).for_each(|_| c.run(Op::Insert, table));
                c.run(Op::Fold, table);
                continue;
            }
            let mut r = c.rng.gen_range(0..16);
            let &(_, op) = self
                .ops()
                .iter()
                .find(|&&(weight, _)| {
                    let here = r < weight;
                    r = r.saturating_sub(weight);
                    here
                })
                .unwrap();
            let errors = c.errors;
            c.run(op, table);
            if reopen && c.errors > errors && c.rng.gen_bool(0.5) {
                c.reopen();
            }
        }
    }

    /// The operations of a step and their weights (out of 16).
    fn ops(self) -> &'static [(u32, Op)] {
        use Op::*;
        match self {
            Workload::Mixed => &[
                (2, Remove),
                (1, Fold),
                (1, Regenerate),
                (2, Write),
                (1, Flush),
                (9, Insert),
            ],
            Workload::NewStore | Workload::Migration => {
                &[(2, Remove), (2, Fold), (2, Write), (1, Flush), (9, Insert)]
            }
            // Six inserts and a fold, always (`run_child`).
            Workload::Folds => &[(16, Insert)],
            Workload::BulkLoad => &[(2, Remove), (1, Fold), (5, Bulk), (1, Write), (7, Insert)],
            Workload::Import => &[
                (3, ImportCopy),
                (3, ImportBatch),
                (2, DropOther),
                (1, Remove),
                (7, Insert),
            ],
            Workload::ChangeLayout => &[(2, Remove), (2, Write), (4, Relayout), (8, Insert)],
            Workload::Tables => &[(4, CreateOther), (4, DropOther), (1, Remove), (7, Insert)],
            Workload::Sealed => &[(5, Seal), (3, Unseal), (1, Remove), (7, Insert)],
            Workload::Guard => &[
                (2, GuardMerge),
                (2, GuardReopen),
                (2, Fold),
                (6, GuardWrite),
                (4, GuardWrites),
            ],
            // More flushes: a flush after a failed sync is where a store
            // would say durable what it lost.
            Workload::Eio | Workload::EioReopen => &[
                (2, Remove),
                (1, Fold),
                (1, Regenerate),
                (3, Write),
                (2, Flush),
                (7, Insert),
            ],
        }
    }
}

/// Cuts come in chains of this many: the next cut starts from the image the
/// last left, so recovery from a cut is itself cut.
pub const CHAIN: u32 = 3;

pub fn chain_of(cut: u32) -> u32 {
    cut / CHAIN
}

/// The layout of the tables a chain creates: chains alternate between the
/// blocked layout and the split-block layout (Parquet's SBBF, XXH64: the
/// same files, its eight positions counted as the standard layout's are),
/// so both go through every workload.
pub fn layout_of(cut: u32) -> Layout {
    if chain_of(cut).is_multiple_of(2) {
        Layout::Blocked
    } else {
        Layout::SplitBlock
    }
}

/// A random moment: after a random number of filesystem operations
/// (log-uniform up to 2^18), at the 1st to 200th sync (everything written
/// before it unsynced), or right after the 1st to 64th unlink.
fn random_trigger(rng: &mut StdRng) -> Trigger {
    match rng.gen_range(0..4) {
        0 | 1 => {
            let scale = 1u64 << rng.gen_range(0..18);
            Trigger::Ops(scale + rng.gen_range(0..scale))
        }
        2 => Trigger::Syncs(rng.gen_range(1..=200)),
        _ => Trigger::Unlinks(rng.gen_range(1..=64)),
    }
}
