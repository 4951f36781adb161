//! Filter files in and out of the store: [`Table::export`] writes a table's
//! filter as a filter file (`docs/FORMAT.md` §3-7), [`FilterStore::import`]
//! creates a table from a counting filter file.
//!
//! Only a **counting** filter can become a table: a table's removes must be
//! checked against its counters (a remove of a key whose counters include a
//! zero is refused) and decrement them, and a bit filter does not say how
//! many keys set each bit. Guessing 1 per set bit would let a remove clear a
//! bit that another key still needs — a false negative — so a bit filter is
//! refused with a message that says to export the counting filter instead.
//! Saturated (sticky) counters are imported as they are, so they stay
//! sticky.
//!
//! # Streaming, and what an import checks
//! Both directions stream: an export writes the frame header, the
//! descriptor, then the counters chunk by chunk from the page file, then the
//! CRC ([`Table::export_to`]); an import reads the header and descriptor,
//! then the counters chunk by chunk straight into the new table's page file,
//! and checks the CRC at the end ([`FilterStore::import_from`]). Memory: the
//! new table's bit filter (`m/8`, as any open table) and one 16 KiB chunk,
//! well under the 1.5 × the counters the issue allows. Nothing names the new
//! table until every check passed:
//!
//! * the file (frame, descriptor, lengths, padding, CRC: `docs/FORMAT.md` §7);
//! * **the counters against `n`** ([`check`]):
//!   their sum, their fill, every block (a run of 512 counters in the
//!   standard layout) and, in the split-block layout, every block's lanes,
//!   against what `n` distinct keys make, with tolerances from the model's
//!   spread. What no check of the counters can see without the keys is
//!   stated there: the counters of `n` *other* keys, or a few keys missing.

mod check;
mod model;

use crate::codec::filter_file::{encode_bit_filter, CounterWidth, DescriptorV1, DESCRIPTOR_LEN};
use crate::codec::frame::{self, Kind};
use crate::codec::reader::ByteReader;
use crate::error::CodecError;
use crate::filter::counting::{CountingFilter, COUNTER_BLOCK_BYTES};
use crate::filter::params::FilterParams;
use crate::store::budget;
use crate::store::catalog::{validate_name, TableMeta};
use crate::store::disk::chunks as pages;
use crate::store::disk::remove_files;
use crate::store::error::StoreError;
use crate::store::open::FilterStore;
use crate::store::table::Generation;
use crate::store::table::Table;
use check::CounterCheck;
use std::io::{Read, Write};

/// Which filter [`Table::export`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportKind {
    /// The bit filter (`m/8` bytes): for lookups elsewhere; it cannot become
    /// a table again.
    Bits,
    /// The counting filter (`m/2` bytes, 4-bit counters): what
    /// [`FilterStore::import`] takes to make a table with the same counters.
    Counting,
}

impl Table {
    /// The table's filter as a filter file (`docs/FORMAT.md` §3-7), with its
    /// live key count as `n`: the bytes `filterstore export` writes, in
    /// memory (reserved under the memory budget); [`export_to`](Table::export_to)
    /// streams them instead.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{decode_filter, ExportKind, FilterStore, StoreError, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("t", TableSpec::new(1_000, 0.01))?;
    /// for i in 0..500u32 {
    ///     t.insert(&i.to_le_bytes())?;
    /// }
    /// let bits = t.export(ExportKind::Bits)?;
    /// let counting = t.export(ExportKind::Counting)?;
    /// let m = t.params().m() as usize;
    /// assert!(bits.len() > m / 8 && bits.len() < m / 8 + 256); // m/8 bytes plus headers
    /// assert!(counting.len() > m / 2 && counting.len() < m / 2 + 256);
    /// assert_eq!(decode_filter(&bits)?.n(), 500);
    ///
    /// // A counting file becomes a table with the same counters and seed.
    /// let copy = store.import("copy", &counting)?;
    /// assert_eq!((copy.live_keys(), copy.params()), (500, t.params()));
    /// assert!((0..500u32).all(|i| copy.contains(&i.to_le_bytes())));
    /// assert_eq!(copy.export(ExportKind::Counting)?, counting);
    /// // A bit filter cannot become a table.
    /// assert!(matches!(store.import("bits", &bits), Err(StoreError::NotCounting)));
    /// # Ok(()) }
    /// ```
    pub fn export(&self, kind: ExportKind) -> Result<Vec<u8>, StoreError> {
        let p = self.params();
        let len = match kind {
            ExportKind::Counting => crate::filter::counting::counter_bytes(&p) as u64,
            ExportKind::Bits => p.bit_bytes(),
        } + (frame::OVERHEAD + DESCRIPTOR_LEN) as u64;
        let _memory = budget::reserve(|| format!("the export of table {:?}", self.name()), len)?;
        match kind {
            ExportKind::Counting => {
                let mut out = Vec::new();
                out.try_reserve_exact(len as usize)
                    .map_err(|_| StoreError::OutOfMemory {
                        table: self.name().to_string(),
                        bytes: len,
                    })?;
                self.export_to(kind, &mut out)?;
                Ok(out)
            }
            ExportKind::Bits => {
                let g = self.current();
                Ok(encode_bit_filter(&g.bits, self.live_keys()))
            }
        }
    }

    /// Writes [`export`](Table::export)'s bytes to `out` as they are made:
    /// the counting filter chunk by chunk from the page file (the log is
    /// folded first, or, in a read-only store, applied to each chunk as it
    /// is read), holding one chunk; the bit filter word by word. Returns the
    /// bytes written. Writers wait meanwhile (the table's writer lock is
    /// held), lookups do not.
    pub fn export_to(&self, kind: ExportKind, out: &mut dyn Write) -> Result<u64, StoreError> {
        let io = |source| StoreError::Io {
            op: "writing the export",
            source,
        };
        let g = self.inner.gen.load_full();
        let p = g.params;
        let width = match kind {
            ExportKind::Counting => CounterWidth::Four,
            ExportKind::Bits => CounterWidth::Bit,
        };
        let mut w = g.writer.lock();
        g.check_live()?;
        if kind == ExportKind::Counting {
            g.fold_if_writable(&mut w)?;
        }
        let d = DescriptorV1::raw(p, g.live_keys_locked(&w), width);
        let body_len = DESCRIPTOR_LEN as u64 + d.payload_len;
        // The lowest version that describes the file, as the in-memory
        // encoders write it (1 for the version-1 layouts).
        let head = frame::header(width.file_kind(), 0, body_len, d.format_version());
        let mut crc = crc32fast::Hasher::new();
        let mut put = |bytes: &[u8]| -> Result<(), StoreError> {
            crc.update(bytes);
            out.write_all(bytes).map_err(io)
        };
        put(&head)?;
        put(&d.to_bytes())?;
        match kind {
            ExportKind::Counting => g.stream_counters(&w, &mut put)?,
            ExportKind::Bits => {
                drop(w);
                let mut buf = Vec::with_capacity(8 * 1024);
                for i in 0..p.num_words() {
                    buf.extend_from_slice(
                        &crate::filter::bloom::BloomRead::word(&g.bits, i).to_le_bytes(),
                    );
                    if buf.len() >= 8 * 1024 {
                        put(&buf)?;
                        buf.clear();
                    }
                }
                put(&buf)?;
            }
        }
        let crc = crc.finalize();
        out.write_all(&crc.to_le_bytes()).map_err(io)?;
        Ok(frame::OVERHEAD as u64 + body_len)
    }
}

impl FilterStore {
    /// Creates table `name` from a counting filter file (what
    /// [`Table::export`] writes with [`ExportKind::Counting`]): same
    /// parameters, seed and counters, `n` live keys. A bit filter file is
    /// refused with [`StoreError::NotCounting`] (see the module docs for
    /// why), bytes that are not a valid filter file, or whose counters do
    /// not agree with its `n` (module docs), with
    /// [`StoreError::BadFilterFile`]. Durable when this returns.
    pub fn import(&self, name: &str, file: &[u8]) -> Result<Table, StoreError> {
        self.import_from(name, &mut &file[..])
    }

    /// [`import`](FilterStore::import) from a reader, streaming (module
    /// docs): the file is read once, its counters go straight into the new
    /// table's files, and the table enters the catalog only after the CRC
    /// and the counter checks passed (on any failure its files are deleted).
    /// A file that ends early is
    /// [`BadFilterFile`](StoreError::BadFilterFile)`(`[`CodecError::Truncated`]`)`
    /// naming the length its header declares and the bytes it held (while
    /// the header itself is read, the header's length: 72 bytes).
    pub fn import_from(&self, name: &str, file: &mut dyn Read) -> Result<Table, StoreError> {
        validate_name(name)?;
        self.inner.shared.check_writable()?;
        let bad = StoreError::BadFilterFile;
        let mut head = [0u8; frame::HEADER_LEN + DESCRIPTOR_LEN];
        let mut input = Input {
            file,
            at: 0,
            expected: head.len() as u64,
        };
        input.read_exact(&mut head)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        let mut fh = [0u8; frame::HEADER_LEN];
        fh.copy_from_slice(&head[..frame::HEADER_LEN]);
        let (kind, flags, body_len, version) = frame::decode_header(&fh).map_err(bad)?;
        let d = counting_descriptor(&head[frame::HEADER_LEN..], kind, flags, body_len, version)?;
        let p = d.params;
        // Checked above: the descriptor and the counters of `p`, which fit
        // in memory (`counter_bytes` is a usize).
        input.expected = (frame::HEADER_LEN + frame::TRAILER_LEN) as u64 + body_len;
        let mut source = Streamed {
            input,
            crc,
            check: CounterCheck::new(&p, d.n).map_err(bad)?,
        };
        self.create_from_chunks(name, p, d.n, &mut source)
    }

    /// Creates table `name` holding exactly the counters of `counters`, with
    /// `live_keys` live keys (the file's `n`), after the checks of the
    /// module docs. The table's parameters (layout, `m`, `k`, hash and seed)
    /// are the filter's; it is recorded as sized for `live_keys` keys at the
    /// false-positive rate the layout model gives for that many. Durable when
    /// this returns; a crash before that leaves no table (the files written
    /// so far are collected at the next open).
    pub fn import_counting(
        &self,
        name: &str,
        counters: &CountingFilter,
        live_keys: u64,
    ) -> Result<Table, StoreError> {
        validate_name(name)?;
        self.inner.shared.check_writable()?;
        let p = *counters.params();
        let mut source = InMemory {
            bytes: counters.as_bytes(),
            check: CounterCheck::new(&p, live_keys).map_err(StoreError::BadFilterFile)?,
        };
        self.create_from_chunks(name, p, live_keys, &mut source)
    }

    /// Creates table `name` with parameters `p` and `n` live keys from the
    /// chunks `source` gives in order, then runs its checks: memory first,
    /// then the files (named by nothing yet), then the catalog record, the
    /// commit point; on any error the files are deleted.
    fn create_from_chunks(
        &self,
        name: &str,
        p: FilterParams,
        n: u64,
        source: &mut dyn ChunkImport,
    ) -> Result<Table, StoreError> {
        let mut catalog = self.inner.shared.catalog.lock();
        if catalog.contains(name) {
            return Err(StoreError::TableExists(name.to_string()));
        }
        self.check_filter_memory(name, &p)?;
        let expected_keys = n.max(1);
        let meta = TableMeta::new_table(
            catalog.header().next_table_id,
            name,
            &p,
            expected_keys,
            // Inside (0, 1) whatever n is, so the record stays valid.
            p.expected_fp(expected_keys).clamp(1e-12, 0.5),
        );
        let (bits, memory) = budget::bit_filter(name, p)?;
        let gen = Generation::create(&self.inner.shared, meta, bits, memory)?;
        let filled = gen
            .fill(i64::try_from(n).unwrap_or(i64::MAX), &mut |idx, buf| {
                source.chunk(&p, idx, buf)
            })
            .and_then(|()| source.finish());
        if let Err(e) = filled {
            gen.mark_dropped();
            let (id, generation) = (gen.meta.id, gen.meta.generation);
            drop(gen);
            remove_files(&self.inner.shared.dir, id, generation);
            return Err(e);
        }
        self.commit_new_table(&mut catalog, gen)
    }
}

/// Where an import's counters come from.
trait ChunkImport {
    /// Puts chunk `idx`'s counters into `buf` (empty), and counts them.
    fn chunk(&mut self, p: &FilterParams, idx: u64, buf: &mut Vec<u8>) -> Result<(), StoreError>;
    /// After the last chunk: the remaining checks.
    fn finish(&mut self) -> Result<(), StoreError>;
}

/// The counters of a filter file being read.
struct Streamed<'a> {
    input: Input<'a>,
    crc: crc32fast::Hasher,
    check: CounterCheck,
}

impl ChunkImport for Streamed<'_> {
    fn chunk(&mut self, p: &FilterParams, idx: u64, buf: &mut Vec<u8>) -> Result<(), StoreError> {
        let len = pages::blocks_in_chunk(p, idx) as usize * COUNTER_BLOCK_BYTES;
        buf.resize(len, 0);
        self.input.read_exact(buf)?;
        self.crc.update(buf);
        self.check
            .add(idx * pages::CHUNK_COUNTERS, buf)
            .map_err(StoreError::BadFilterFile)
    }

    fn finish(&mut self) -> Result<(), StoreError> {
        let bad = StoreError::BadFilterFile;
        let mut trailer = [0u8; frame::TRAILER_LEN];
        self.input.read_exact(&mut trailer)?;
        let stored = u32::from_le_bytes(trailer);
        let computed = self.crc.clone().finalize();
        if stored != computed {
            return Err(bad(CodecError::ChecksumMismatch { stored, computed }));
        }
        let mut extra = [0u8; 1];
        let more = self
            .input
            .file
            .read(&mut extra)
            .map_err(|source| StoreError::Io {
                op: "reading the filter file",
                source,
            })?;
        if more != 0 {
            return Err(bad(CodecError::TrailingBytes { extra: 1 }));
        }
        self.check.finish().map_err(bad)
    }
}

/// The counters of a counting filter in memory.
struct InMemory<'a> {
    bytes: &'a [u8],
    check: CounterCheck,
}

impl ChunkImport for InMemory<'_> {
    fn chunk(&mut self, p: &FilterParams, idx: u64, buf: &mut Vec<u8>) -> Result<(), StoreError> {
        let at = (idx * pages::CHUNK_COUNTERS / 2) as usize;
        let len = pages::blocks_in_chunk(p, idx) as usize * COUNTER_BLOCK_BYTES;
        buf.extend_from_slice(&self.bytes[at..at + len]);
        self.check
            .add(idx * pages::CHUNK_COUNTERS, buf)
            .map_err(StoreError::BadFilterFile)
    }

    fn finish(&mut self) -> Result<(), StoreError> {
        self.check.finish().map_err(StoreError::BadFilterFile)
    }
}

/// A filter file being read, and how far: a file that ends early is
/// [`CodecError::Truncated`] naming the length its header declares
/// (`expected`; while the header itself is read, the header's length) and
/// the bytes it held.
struct Input<'a> {
    file: &'a mut dyn Read,
    /// Bytes read so far.
    at: u64,
    /// Bytes the file must have.
    expected: u64,
}

impl Input<'_> {
    /// Fills `buf`; an end of file before it is full is a truncated file.
    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), StoreError> {
        let mut got = 0;
        while got < buf.len() {
            match self.file.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(StoreError::BadFilterFile(CodecError::Truncated {
                        needed: self.expected,
                        found: self.at + got as u64,
                    }))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(StoreError::Io {
                        op: "reading the filter file",
                        source,
                    })
                }
            }
        }
        self.at += got as u64;
        Ok(())
    }
}

/// The descriptor of a filter file whose frame header says `kind`, `flags`,
/// `body_len` and `version`, once the file is known to be a counting filter
/// of 4-bit counters whose body is exactly the descriptor and its counters.
fn counting_descriptor(
    descriptor: &[u8],
    kind: Kind,
    flags: u8,
    body_len: u64,
    version: u16,
) -> Result<DescriptorV1, StoreError> {
    let bad = StoreError::BadFilterFile;
    match kind {
        Kind::CountingFilter => {}
        Kind::BitFilter => return Err(StoreError::NotCounting),
        other => {
            return Err(bad(CodecError::WrongKind {
                expected: Kind::CountingFilter.name(),
                found: other.name(),
            }))
        }
    }
    if flags != 0 {
        return Err(bad(CodecError::InvalidField {
            field: "flags",
            reason: format!("{flags:#04x}: a filter file defines none"),
        }));
    }
    let d = DescriptorV1::read(&mut ByteReader::new(descriptor)).map_err(bad)?;
    // A version-1 frame cannot name the split-block layout (as the
    // in-memory decoder refuses it).
    d.check_frame_version(version).map_err(bad)?;
    if d.counter_width != CounterWidth::Four
        || d.payload_len != crate::filter::counting::counter_bytes(&d.params) as u64
        || body_len != DESCRIPTOR_LEN as u64 + d.payload_len
    {
        return Err(bad(CodecError::InvalidField {
            field: "payload length",
            reason: format!(
                "a body of {body_len} bytes with a payload of {} for counters of m = {}",
                d.payload_len,
                d.params.m()
            ),
        }));
    }
    Ok(d)
}
