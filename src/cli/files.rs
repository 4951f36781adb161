//! The file commands: `export`, `import`, `inspect`, `probe` and
//! `estimate`. Each reads or writes one of the two framed formats of
//! `docs/FORMAT.md` — exported filter files (§5, §7, bit or counting) and
//! exchange messages (§12, full or delta) — and tells them apart by the
//! frame's kind byte, so every command accepts both wherever that makes
//! sense.

use super::failure::{Failure, Outcome};
use super::keys::KeyReader;
use super::open::{open_or_create, open_read_only, or_discard};
use super::output::Out;
use super::target::write_output;
use filterstore::{build_message, decode_filter, decode_frame, decode_message_with_limit};
use filterstore::{encode_message, FilterParams};
use filterstore::{BitFilter, BloomRead, HashSpec};
use filterstore::{CodecChoice, MessageTarget};
use filterstore::{CodecError, Frame, FrameKind as Kind, StoreError};
use filterstore::{DecodedMessage, ExportKind};
use std::io::Read;
use std::path::Path;

/// What `export` writes.
pub struct ExportOptions<'a> {
    /// The counting filter instead of the bit filter.
    pub counting: bool,
    /// An exchange message instead of a filter file.
    pub compressed: bool,
    /// Largest message accepted, bytes (with `compressed`).
    pub budget: Option<u64>,
    /// The table's keys, to build a transmission-sized filter (with `compressed`).
    pub keys: Option<&'a Path>,
}

/// `filterstore export`.
pub fn export(
    dir: &Path,
    table: &str,
    output: Option<&Path>,
    opts: &ExportOptions<'_>,
    out: &mut Out,
) -> Outcome {
    if opts.counting && opts.compressed {
        return Err(Failure(
            "--counting and --compressed exclude each other: messages carry bit filters".into(),
        ));
    }
    if !opts.compressed && (opts.budget.is_some() || opts.keys.is_some()) {
        return Err(Failure("--budget and --keys need --compressed".into()));
    }
    let store = open_read_only(dir)?;
    let t = store.open_table(table)?;
    if opts.compressed {
        let (bytes, what) = export_message(&t, opts)?;
        let what = format!("the {what} of table {table}");
        return write_output(output, &what, "binary", out, &mut |w| {
            w.write_all(&bytes)
                .map_err(|e| Failure(format!("cannot write: {e}")))
        });
    }
    // Filter files stream from the table to the target: the counting
    // filter chunk by chunk from its page file, never whole in memory.
    let (kind, what) = if opts.counting {
        (ExportKind::Counting, "counting filter")
    } else {
        (ExportKind::Bits, "bit filter")
    };
    let what = format!("the {what} of table {table}");
    write_output(output, &what, "binary", out, &mut |w| {
        t.export_to(kind, w).map(drop).map_err(Failure::from)
    })
}

/// The exchange message `export --compressed` writes, and what it is.
fn export_message(
    t: &filterstore::Table,
    opts: &ExportOptions<'_>,
) -> Result<(Vec<u8>, &'static str), Failure> {
    let Some(file) = opts.keys else {
        let msg = encode_message(&t.bloom(), t.live_keys(), 1, CodecChoice::Auto)?;
        if let Some(b) = opts.budget.filter(|&b| msg.len() as u64 > b) {
            return Err(Failure(format!(
                "the table's filter encodes to {} bytes, over the budget of {b}; pass --keys FILE (the table's keys) to build a smaller filter sized for transmission",
                msg.len()
            )));
        }
        return Ok((msg, "exchange message of the table's filter"));
    };
    // The table's own filter is sized for lookups (about half its bits set)
    // and does not compress; a filter built for transmission from the keys
    // is 20-40% smaller at equal FP (see `plan_for_fp`).
    let keys = read_all_keys(file)?;
    let target = match opts.budget {
        Some(b) => MessageTarget::Budget(b),
        None => MessageTarget::Fp(t.target_fp()),
    };
    let (msg, _) = build_message(&keys, target, HashSpec::random(), 1)?;
    Ok((msg, "exchange message built from the keys"))
}

fn read_all_keys(file: &Path) -> Result<Vec<Vec<u8>>, Failure> {
    let mut reader = KeyReader::open(Some(file))?;
    let mut keys = Vec::new();
    while reader.next_batch(|k, _| keys.push(k.to_vec()))? > 0 {}
    reader.finish();
    Ok(keys)
}

fn read_file(path: &Path) -> Result<Vec<u8>, Failure> {
    let bytes =
        std::fs::read(path).map_err(|e| Failure(format!("cannot read {}: {e}", path.display())))?;
    if bytes.is_empty() {
        return Err(Failure(format!(
            "{} is empty: not a filter file or an exchange message",
            path.display()
        )));
    }
    Ok(bytes)
}

/// A filter read from a file or a full message, and the writer's key count.
struct Loaded {
    filter: BitFilter,
    n: u64,
}

/// A filter file or message whose header is checked and whose payload is not
/// yet decoded: what can be known for the cost of the bytes already read.
enum Peeked<'a> {
    File(filterstore::DecodedFilter<'a>),
    Message(DecodedMessage<'a>),
}

impl Peeked<'_> {
    fn params(&self) -> FilterParams {
        match self {
            Peeked::File(d) => *d.params(),
            Peeked::Message(m) => *m.params(),
        }
    }
}

/// Checks the frame and descriptor of `bytes` (a filter file or a message)
/// without decoding its payload; a message describing more than `max_bits`
/// bits is refused before anything is allocated.
fn peek<'a>(path: &Path, bytes: &'a [u8], max_bits: u64) -> Result<Peeked<'a>, Failure> {
    let defect = |e: &dyn std::fmt::Display| Failure(format!("{}: {e}", path.display()));
    let f = decode_frame(bytes).map_err(|e| defect(&e))?;
    match f.kind {
        Kind::BitFilter | Kind::CountingFilter => {
            Ok(Peeked::File(decode_filter(bytes).map_err(|e| defect(&e))?))
        }
        Kind::ExchangeFull | Kind::ExchangeDelta => Ok(Peeked::Message(
            decode_message_with_limit(bytes, max_bits).map_err(|e| defect(&e))?,
        )),
        other => Err(Failure(format!(
            "{}: a {} record is not a filter file or an exchange message",
            path.display(),
            other.name()
        ))),
    }
}

/// Decodes a peeked filter file or full message into a bit filter: the
/// output bitmap is the only allocation of the size of the filter.
fn load(path: &Path, peeked: Peeked<'_>) -> Result<Loaded, Failure> {
    let defect = |e: &dyn std::fmt::Display| Failure(format!("{}: {e}", path.display()));
    match peeked {
        Peeked::File(d) => Ok(Loaded {
            filter: d.to_bit_filter().map_err(|e| defect(&e))?,
            n: d.n(),
        }),
        Peeked::Message(m) => {
            // A delta is an XOR against a filter this file does not hold.
            let received = m.filter().map_err(|e| defect(&e))?;
            let filter = received.into_owned().map_err(|e| defect(&e))?;
            Ok(Loaded {
                filter,
                n: m.descriptor.n,
            })
        }
    }
}

/// `filterstore import`: a table from a counting filter file, streamed from
/// the file into the table (`FilterStore::import_from`). A bit filter is
/// refused: see `FilterStore::import` for why. The file's head is checked
/// before the database is opened, so that a file that is no counting filter
/// (a text file, a bit filter, one cut short) is refused without creating
/// a database; a file cut short is reported with the bytes it holds.
pub fn import(dir: &Path, table: &str, file: &Path, out: &mut Out) -> Outcome {
    let cannot_read = |e: std::io::Error| Failure(format!("cannot read {}: {e}", file.display()));
    let mut f = std::fs::File::open(file).map_err(cannot_read)?;
    let mut head = Vec::new();
    (&mut f)
        .take(IMPORT_HEAD + 1)
        .read_to_end(&mut head)
        .map_err(cannot_read)?;
    check_import_head(file, &head)?;
    let store = open_or_create(dir)?;
    let mut source = head
        .as_slice()
        .chain(std::io::BufReader::with_capacity(1 << 16, f));
    let (_store, t) = or_discard(store, |store| match store.import_from(table, &mut source) {
        Err(StoreError::NotCounting) => Err(not_counting(file)),
        // A truncated file: the store names the length its header declares
        // and the bytes it held.
        Err(StoreError::BadFilterFile(e)) => Err(Failure(format!("{}: {e}", file.display()))),
        other => Ok(other?),
    })?;
    let p = t.params();
    let s = t.stats()?;
    out.line(&format!(
        "imported table {table} from {}: {} layout, m = {}, k = {}, seed {:#018x}, {} live keys, {} saturated counters (durable)",
        file.display(),
        p.layout(),
        p.m(),
        p.k(),
        p.hash().seed,
        t.live_keys(),
        s.saturated_counters
    ))
}

/// How much of a file `import` checks before opening the database: a
/// counting filter of up to 130,000 counters whole (so that its every
/// defect is found here), the frame header of any larger one.
const IMPORT_HEAD: u64 = 1 << 16;

/// Checks the first bytes of a file to import (`head`: all of it if it has
/// at most [`IMPORT_HEAD`] bytes, else one more than that): the frame as far
/// as it goes, and its kind.
fn check_import_head(file: &Path, head: &[u8]) -> Result<(), Failure> {
    let defect = |e: &dyn std::fmt::Display| Failure(format!("{}: {e}", file.display()));
    if head.is_empty() {
        return Err(Failure(format!(
            "{} is empty: not a counting filter file",
            file.display()
        )));
    }
    let kind = match decode_frame(head) {
        Ok(frame) => Some(frame.kind),
        // The head of a longer file: the header's checks came before the
        // body's length (FORMAT.md § 14), so its kind byte (offset 8, § 2)
        // is valid.
        Err(CodecError::Truncated { found, .. })
            if found == head.len() as u64 && found > IMPORT_HEAD =>
        {
            head.get(8).copied().and_then(Kind::from_id)
        }
        Err(e) => return Err(defect(&e)),
    };
    match kind {
        Some(Kind::CountingFilter) => Ok(()),
        Some(Kind::BitFilter) => Err(not_counting(file)),
        Some(other) => Err(defect(&format!(
            "a {} record, not a counting filter file",
            other.name()
        ))),
        None => Err(defect(&"not a counting filter file")),
    }
}

/// The refusal of a bit filter file by `import`.
fn not_counting(file: &Path) -> Failure {
    Failure(format!(
        "{} is a bit filter: a table needs counters to check and apply removes, and a bit filter does not say how many keys set each bit; export the table with `filterstore export TABLE --counting` and import that",
        file.display()
    ))
}

/// `filterstore inspect`.
pub fn inspect(file: &Path, json: bool, max_bits: u64, out: &mut Out) -> Outcome {
    let bytes = read_file(file)?;
    let defect = |e: &dyn std::fmt::Display| Failure(format!("{}: {e}", file.display()));
    let f = decode_frame(&bytes).map_err(|e| defect(&e))?;
    if matches!(f.kind, Kind::ExchangeFull | Kind::ExchangeDelta) {
        let m = decode_message_with_limit(&bytes, max_bits).map_err(|e| defect(&e))?;
        verify_payload(&m).map_err(|e| defect(&e))?;
        return inspect_message(&bytes, &f, &m, json, out);
    }
    let i = filterstore::inspect(&bytes).map_err(|e| defect(&e))?;
    if json {
        out.line(&serde_json::to_string_pretty(&i)?)
    } else {
        out.line(&i.to_string())
    }
}

/// Decodes a message's payload and checks it against its header (a coded
/// payload must decode to exactly the `ones` one bits the header states):
/// `inspect` promises a non-zero exit on any defect, not only on a bad frame.
fn verify_payload(m: &DecodedMessage<'_>) -> Result<(), filterstore::ExchangeError> {
    if m.is_delta() {
        // The XOR applies to a base this file does not hold: decode it
        // against an all-zero base of its shape, which yields the XOR itself.
        let zero = BitFilter::new(*m.params())?;
        m.apply_to(&zero, m.base_version)?;
    } else {
        m.filter()?;
    }
    Ok(())
}

fn inspect_message(
    bytes: &[u8],
    f: &Frame<'_>,
    m: &DecodedMessage<'_>,
    json: bool,
    out: &mut Out,
) -> Outcome {
    let p = m.params();
    let crc = f.crc32;
    let mut v = serde_json::json!({
        "file_len": bytes.len(),
        "format_version": f.version,
        "min_reader_version": f.min_reader,
        "kind": f.kind.name(),
        "kind_id": f.kind.id(),
        "flags": f.flags,
        "body_len": f.body.len(),
        "crc32": crc,
        "layout": p.layout().name(),
        "layout_id": p.layout().id(),
        "hash": p.hash().algo.name(),
        "hash_id": p.hash().algo.id(),
        "seed": p.hash().seed,
        "m": p.m(),
        "k": p.k(),
        "n": m.descriptor.n,
        "codec": m.descriptor.codec.name(),
        "codec_id": m.descriptor.codec.id(),
        "payload_len": m.payload_len(),
        "version": m.version,
        "base_version": m.base_version,
        "ones": m.ones,
        "model_fp": p.expected_fp(m.descriptor.n),
    });
    // Format version 2: the build side's statistics, when the message has them.
    if let (Some(s), serde_json::Value::Object(map)) = (m.build_stats(), &mut v) {
        map.insert("build_rows".into(), s.rows.into());
        map.insert("build_distinct_keys".into(), s.distinct_keys.into());
    }
    if json {
        return out.line(&serde_json::to_string_pretty(&v)?);
    }
    let mut text = String::new();
    if let serde_json::Value::Object(map) = &v {
        for (name, value) in map {
            let shown = match (name.as_str(), value) {
                ("crc32", _) => format!("{crc:#010x} (verified)"),
                ("seed", _) => format!("{:#018x}", p.hash().seed),
                (_, serde_json::Value::String(s)) => s.clone(),
                (_, other) => other.to_string(),
            };
            text.push_str(&format!("{:<19}{shown}\n", name.replace('_', " ")));
        }
    }
    out.line(text.trim_end())
}

/// `filterstore probe`: prints the keys that may be in the filter.
pub fn probe(filter: &Path, keys: Option<&Path>, max_bits: u64, out: &mut Out) -> Outcome {
    let bytes = read_file(filter)?;
    let loaded = load(filter, peek(filter, &bytes, max_bits)?)?;
    let mut reader = KeyReader::open(keys)?;
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(super::keys::BATCH_KEYS);
    loop {
        batch.clear();
        if reader.next_batch(|k, _| batch.push(k.to_vec()))? == 0 {
            break;
        }
        for (k, hit) in batch.iter().zip(loaded.filter.contains_many(&batch)) {
            if hit {
                out.key_line(k)?;
            }
        }
    }
    reader.finish();
    Ok(())
}

/// `filterstore estimate`: set sizes and intersection/union estimates.
pub fn estimate(a: &Path, b: &Path, json: bool, max_bits: u64, out: &mut Out) -> Outcome {
    let (bytes_a, bytes_b) = (read_file(a)?, read_file(b)?);
    let (pa, pb) = (peek(a, &bytes_a, max_bits)?, peek(b, &bytes_b, max_bits)?);
    // Compatibility is decided from the headers, before either payload is
    // decoded: two incompatible filters cost nothing to refuse.
    if pa.params() != pb.params() {
        let (x, y) = (pa.params(), pb.params());
        return Err(Failure(format!(
            "{} and {} cannot be compared: different parameters ({} m = {} k = {} seed {:#x} against {} m = {} k = {} seed {:#x})",
            a.display(),
            b.display(),
            x.layout(),
            x.m(),
            x.k(),
            x.hash().seed,
            y.layout(),
            y.m(),
            y.k(),
            y.hash().seed
        )));
    }
    let (fa, fb) = (load(a, pa)?, load(b, pb)?);
    let incompatible = |e: filterstore::FilterError| {
        Failure(format!(
            "{} and {} cannot be compared: {e}",
            a.display(),
            b.display()
        ))
    };
    let union = fa
        .filter
        .estimate_union_len(&fb.filter)
        .map_err(incompatible)?;
    let inter = fa
        .filter
        .estimate_intersection_len(&fb.filter)
        .map_err(incompatible)?;
    let (ea, eb) = (fa.filter.estimate_len(), fb.filter.estimate_len());
    if json {
        let v = serde_json::json!({
            "a": {"file": a.display().to_string(), "n": fa.n, "estimated_keys": ea},
            "b": {"file": b.display().to_string(), "n": fb.n, "estimated_keys": eb},
            "union": union,
            "intersection": inter,
        });
        return out.line(&serde_json::to_string_pretty(&v)?);
    }
    out.line(&format!(
        "a\t{ea:.0}\t(n = {} in {})\nb\t{eb:.0}\t(n = {} in {})\nunion\t{union:.0}\nintersection\t{inter:.0}",
        fa.n,
        a.display(),
        fb.n,
        b.display()
    ))
}
