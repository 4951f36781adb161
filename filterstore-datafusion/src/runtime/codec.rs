//! How the rule's nodes cross to a worker inside its task's plan: a
//! `PhysicalExtensionCodec` that datafusion-distributed composes with its
//! own (`with_distributed_user_codec`), on the coordinator and on every
//! worker ([`crate::BloomStateBuilderExt::with_bloom_functions`] installs
//! it). docs/FORMAT.md § 16 has the same table.
//!
//! A [`BloomFilterExec`] (little-endian; every length is checked against the
//! bytes left before anything is sliced or allocated):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `FSRF` |
//! | 1 | version, 4 |
//! | 1 | flags: bit 0 = null keys pass; bit 1 = force; other bits zero |
//! | 4 + n | label, UTF-8 |
//! | 4 | number of key expressions (≥ 1) |
//! | per key: 4 + n | the expression as DataFusion's `PhysicalExprNode` protobuf |
//! | 22 | the filter's shape: layout id (1), `m` (8), `k` (4), hash algorithm id (1), seed (8) |
//! | 16 + 8 + 16 | filter id, execution scope, execution token |
//! | 4 + n | the coordinator's rendezvous address, UTF-8 (empty: the coordinator's process) |
//! | 4 | probe place number |
//! | 8 + 8 + 8 + 8 | wait (ms), check window (rows), minimum drop share (f64 bits), buffer (bytes) |
//!
//! A [`BloomTapExec`]: magic `FSRT`, version 6, flags (zero), label, keys,
//! the filter's shape, filter id, scope and token, the rendezvous address,
//! the rate its partials are halved to before they post (f64 bits, in
//! (0, 1); 0: posted at the planned size), and the bytes each partition
//! reads ahead of the join (8; 0: none, a reverse filter's tap otherwise). The token is the execution's secret: the rendezvous takes a
//! post or fetch only with it (`super::rendezvous`). The shape is checked by
//! `FilterParams::new` and capped at [`MAX_PARTIAL_BITS`] before a tap
//! allocates its filter.
//!
//! A [`BloomScanExec`] (a Parquet scan with runtime filters): magic `FSRS`,
//! version 2, flags (zero), scope and token, how long each partition waits
//! for the filters before the scan opens a file (8, ms), the number of
//! filters (4, ≥ 1),
//! then per filter its id (16), flags (1: bit 0 null keys pass), its keys
//! (as above), the number of types (4) and each key's planned type (4 + n, DataFusion's `ArrowType`
//! protobuf). Its child, the scan, DataFusion encodes itself.
//!
//! Coordinator and workers run the same build within one query; a version
//! this build does not read is refused with a message saying so. Version 1
//! (a message inside the node, a creation side run at planning), version
//! 2 (no token) and version 3 (no probe buffer) are gone, and so are tap
//! version 4 (no rate: partials posted at the planned size), tap version 5
//! (no read-ahead) and scan node version 1 (no wait).

use super::exec::{BloomFilterExec, ProbeSpec};
use super::probe::ProbePolicy;
use super::rendezvous::RunKey;
use super::scan_node::{BloomScanExec, ScanFilterSpec};
use super::scope::ScopeCell;
use super::tap::BloomTapExec;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr_with_converter;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr_with_converter;
use datafusion_proto::physical_plan::{
    DefaultPhysicalExtensionCodec, PhysicalExtensionCodec, PhysicalPlanDecodeContext,
    PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf::PhysicalExprNode;
use filterstore::{FilterParams, HashAlgo, HashSpec, Layout};
use prost::Message;
use std::sync::Arc;
use std::time::Duration;

const MAGIC: &[u8; 4] = b"FSRF";
const SCAN_MAGIC: &[u8; 4] = b"FSRS";
const SCAN_VERSION: u8 = 2;
const TAP_MAGIC: &[u8; 4] = b"FSRT";
const TAP_VERSION: u8 = 6;
/// The largest partial filter a decoded plan may ask a worker to allocate:
/// 2^33 bits, 1 GiB.
pub(super) const MAX_PARTIAL_BITS: u64 = 1 << 33;
const VERSION: u8 = 4;
const NULLS_PASS: u8 = 1;
const FORCE: u8 = 2;

/// The codec of [`BloomFilterExec`].
#[derive(Debug, Default, Clone, Copy)]
pub struct BloomCodec;

fn bad(reason: impl Into<String>) -> DataFusionError {
    DataFusionError::Internal(format!("BloomFilterExec codec: {}", reason.into()))
}

impl PhysicalExtensionCodec for BloomCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [input] = inputs else {
            return Err(bad(format!("expected one input, got {}", inputs.len())));
        };
        if buf.starts_with(SCAN_MAGIC) {
            return decode_scan(buf, input, ctx, proto_converter);
        }
        let mut r = Reader(buf);
        let (is_tap, flags) = decode_header(&mut r)?;
        let label = String::from_utf8(r.sized()?.to_vec()).map_err(|_| bad("label not UTF-8"))?;
        let keys = decode_keys(&mut r, &input.schema(), ctx, proto_converter)?;
        let params = decode_params(&mut r)?;
        let filter = u128::from_le_bytes(r.array()?);
        let scope = ScopeCell::fixed(RunKey {
            scope: u64::from_le_bytes(r.array()?),
            token: r.array()?,
        });
        let url = String::from_utf8(r.sized()?.to_vec()).map_err(|_| bad("address not UTF-8"))?;
        let url = (!url.is_empty()).then_some(url);
        if is_tap {
            let fit = decode_fit(&mut r)?;
            let ahead = u64::from_le_bytes(r.array()?);
            r.end()?;
            let tap = BloomTapExec::try_new(
                Arc::clone(input),
                keys,
                (params, fit),
                filter,
                (url, scope),
                label,
            )?
            .with_read_ahead(ahead);
            return Ok(Arc::new(tap));
        }
        let (point, policy) = decode_probe(&mut r, flags)?;
        let spec = ProbeSpec {
            filter,
            point,
            params,
            nulls_pass: flags & NULLS_PASS != 0,
            label,
            policy,
            rendezvous: url,
            scope,
        };
        Ok(Arc::new(BloomFilterExec::try_new(
            Arc::clone(input),
            keys,
            spec,
        )?))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(scan) = node.downcast_ref::<BloomScanExec>() {
            return encode_scan(buf, scan, proto_converter);
        }
        if let Some(t) = node.downcast_ref::<BloomTapExec>() {
            buf.extend_from_slice(TAP_MAGIC);
            buf.push(TAP_VERSION);
            buf.push(0);
            put_sized(buf, t.label().as_bytes())?;
            encode_keys(buf, t.keys(), proto_converter)?;
            encode_params(buf, t.params());
            buf.extend_from_slice(&t.filter_id().to_le_bytes());
            put_key(buf, t.run_key());
            put_sized(buf, t.rendezvous().unwrap_or("").as_bytes())?;
            let fit = t.fit_fp().unwrap_or(0.0);
            buf.extend_from_slice(&fit.to_bits().to_le_bytes());
            buf.extend_from_slice(&t.read_ahead().to_le_bytes());
            return Ok(());
        }
        let Some(node) = node.downcast_ref::<BloomFilterExec>() else {
            return Err(bad(format!("cannot encode {}", node.name())));
        };
        let p = node.policy();
        buf.extend_from_slice(MAGIC);
        buf.push(VERSION);
        let mut flags = 0;
        if node.nulls_pass() {
            flags |= NULLS_PASS;
        }
        if p.force {
            flags |= FORCE;
        }
        buf.push(flags);
        put_sized(buf, node.label().as_bytes())?;
        encode_keys(buf, node.keys(), proto_converter)?;
        encode_params(buf, node.params());
        buf.extend_from_slice(&node.filter_id().to_le_bytes());
        put_key(buf, node.run_key());
        put_sized(buf, node.rendezvous().unwrap_or("").as_bytes())?;
        put_len(buf, node.point())?;
        let wait = u64::try_from(p.wait.as_millis()).unwrap_or(u64::MAX);
        buf.extend_from_slice(&wait.to_le_bytes());
        buf.extend_from_slice(&p.check_window.to_le_bytes());
        buf.extend_from_slice(&p.min_drop.to_bits().to_le_bytes());
        buf.extend_from_slice(&p.buffer_bytes.to_le_bytes());
        Ok(())
    }
}

fn encode_scan(
    buf: &mut Vec<u8>,
    scan: &BloomScanExec,
    proto_converter: &dyn PhysicalProtoConverterExtension,
) -> Result<()> {
    buf.extend_from_slice(SCAN_MAGIC);
    buf.push(SCAN_VERSION);
    buf.push(0);
    put_key(buf, scan.run_key());
    // Rounded up: a wait under a millisecond stays a wait on the workers.
    let wait = u64::try_from(scan.wait().as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    buf.extend_from_slice(&wait.to_le_bytes());
    put_len(buf, scan.filters().len())?;
    for f in scan.filters() {
        buf.extend_from_slice(&f.filter.to_le_bytes());
        buf.push(if f.nulls_pass { NULLS_PASS } else { 0 });
        encode_keys(buf, &f.keys, proto_converter)?;
        put_len(buf, f.types.len())?;
        for t in &f.types {
            let proto = datafusion_proto::protobuf::ArrowType::try_from(t)
                .map_err(|e| bad(e.to_string()))?;
            put_sized(buf, &proto.encode_to_vec())?;
        }
    }
    Ok(())
}

fn decode_scan(
    buf: &[u8],
    input: &Arc<dyn ExecutionPlan>,
    ctx: &TaskContext,
    proto_converter: &dyn PhysicalProtoConverterExtension,
) -> Result<Arc<dyn ExecutionPlan>> {
    let mut r = Reader(buf);
    r.take(4)?;
    let version = r.u8()?;
    if version != SCAN_VERSION {
        return Err(bad(format!(
            "scan node version {version}, this build reads {SCAN_VERSION}: run one filterstore-datafusion build on the coordinator and every worker"
        )));
    }
    if r.u8()? != 0 {
        return Err(bad("scan node flags"));
    }
    let scope = ScopeCell::fixed(RunKey {
        scope: u64::from_le_bytes(r.array()?),
        token: r.array()?,
    });
    let wait = Duration::from_millis(u64::from_le_bytes(r.array()?));
    let n = r.u32()? as usize;
    // Each filter takes at least 25 bytes: refuse a count the bytes cannot
    // hold before reserving anything for it.
    if n == 0 || n > r.0.len() / 25 {
        return Err(bad(format!("{n} scan filters in {} bytes", r.0.len())));
    }
    let schema = input.schema();
    let mut filters = Vec::with_capacity(n);
    for _ in 0..n {
        filters.push(decode_scan_filter(&mut r, &schema, ctx, proto_converter)?);
    }
    r.end()?;
    Ok(Arc::new(BloomScanExec::new(
        Arc::clone(input),
        filters,
        scope,
        wait,
    )))
}

/// One filter of a scan node: its id, flags, keys and their types.
fn decode_scan_filter(
    r: &mut Reader<'_>,
    schema: &Schema,
    ctx: &TaskContext,
    proto_converter: &dyn PhysicalProtoConverterExtension,
) -> Result<ScanFilterSpec> {
    let filter = u128::from_le_bytes(r.array()?);
    let flags = r.u8()?;
    if flags & !NULLS_PASS != 0 {
        return Err(bad(format!("unknown flags {flags:#04x}")));
    }
    let keys = decode_keys(r, schema, ctx, proto_converter)?;
    let t = r.u32()? as usize;
    if t != keys.len() {
        return Err(bad(format!("{t} key types for {} keys", keys.len())));
    }
    let mut types = Vec::with_capacity(t);
    for _ in 0..t {
        let proto = datafusion_proto::protobuf::ArrowType::decode(r.sized()?)
            .map_err(|e| bad(e.to_string()))?;
        types.push(DataType::try_from(&proto).map_err(|e| bad(e.to_string()))?);
    }
    Ok(ScanFilterSpec {
        filter,
        keys,
        types,
        nulls_pass: flags & NULLS_PASS != 0,
    })
}

fn encode_params(buf: &mut Vec<u8>, p: &FilterParams) {
    buf.push(p.layout().id());
    buf.extend_from_slice(&p.m().to_le_bytes());
    buf.extend_from_slice(&p.k().to_le_bytes());
    buf.push(p.hash().algo.id());
    buf.extend_from_slice(&p.hash().seed.to_le_bytes());
}

fn encode_keys(
    buf: &mut Vec<u8>,
    keys: &[Arc<dyn datafusion::physical_expr::PhysicalExpr>],
    proto_converter: &dyn PhysicalProtoConverterExtension,
) -> Result<()> {
    put_len(buf, keys.len())?;
    let nested = DefaultPhysicalExtensionCodec {};
    for k in keys {
        let proto = serialize_physical_expr_with_converter(k, &nested, proto_converter)?;
        put_sized(buf, &proto.encode_to_vec())?;
    }
    Ok(())
}

/// A node's magic, version and flags: whether it is a tap, and its flags.
fn decode_header(r: &mut Reader<'_>) -> Result<(bool, u8)> {
    let magic = r.take(4)?;
    let is_tap = magic == TAP_MAGIC;
    if magic != MAGIC && !is_tap {
        return Err(bad("not a filterstore runtime-filter node"));
    }
    let version = r.u8()?;
    let reads = if is_tap { TAP_VERSION } else { VERSION };
    if version != reads {
        return Err(bad(format!(
            "node version {version}, this build reads {reads}: run one filterstore-datafusion build on the coordinator and every worker"
        )));
    }
    let flags = r.u8()?;
    if flags & !(NULLS_PASS | FORCE) != 0 || (is_tap && flags != 0) {
        return Err(bad(format!("unknown flags {flags:#04x}")));
    }
    Ok((is_tap, flags))
}

/// A tap's rate its partials are halved to (0: not halved).
fn decode_fit(r: &mut Reader<'_>) -> Result<Option<f64>> {
    let fit = f64::from_bits(u64::from_le_bytes(r.array()?));
    if fit == 0.0 {
        return Ok(None);
    }
    if !(fit > 0.0 && fit < 1.0) {
        return Err(bad(format!("a partial rate of {fit}")));
    }
    Ok(Some(fit))
}

/// A probe node's tail: its place and how its tasks wait and check; the
/// end of the bytes.
fn decode_probe(r: &mut Reader<'_>, flags: u8) -> Result<(usize, ProbePolicy)> {
    let point = r.u32()? as usize;
    let wait = Duration::from_millis(u64::from_le_bytes(r.array()?));
    let check_window = u64::from_le_bytes(r.array()?);
    let min_drop = f64::from_bits(u64::from_le_bytes(r.array()?));
    let buffer_bytes = u64::from_le_bytes(r.array()?);
    r.end()?;
    if !(0.0..=1.0).contains(&min_drop) {
        return Err(bad(format!("a minimum drop share of {min_drop}")));
    }
    let policy = ProbePolicy {
        wait,
        check_window,
        min_drop,
        force: flags & FORCE != 0,
        buffer_bytes,
    };
    Ok((point, policy))
}

fn decode_keys(
    r: &mut Reader<'_>,
    schema: &Schema,
    ctx: &TaskContext,
    proto_converter: &dyn PhysicalProtoConverterExtension,
) -> Result<Vec<Arc<dyn datafusion::physical_expr::PhysicalExpr>>> {
    let n = r.u32()? as usize;
    // Each key needs at least its 4-byte length: refuse a count the bytes
    // cannot hold before reserving anything for it.
    if n == 0 || n > r.0.len() / 4 {
        return Err(bad(format!("{n} key expressions in {} bytes", r.0.len())));
    }
    let nested = DefaultPhysicalExtensionCodec {};
    let decode_ctx = PhysicalPlanDecodeContext::new(ctx, &nested);
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        let proto = PhysicalExprNode::decode(r.sized()?).map_err(|e| bad(e.to_string()))?;
        keys.push(parse_physical_expr_with_converter(
            &proto,
            schema,
            &decode_ctx,
            proto_converter,
        )?);
    }
    Ok(keys)
}

fn decode_params(r: &mut Reader<'_>) -> Result<FilterParams> {
    let layout = r.u8()?;
    let m = u64::from_le_bytes(r.array()?);
    let k = u32::from_le_bytes(r.array()?);
    let algo = r.u8()?;
    let seed = u64::from_le_bytes(r.array()?);
    let layout = Layout::from_id(layout).ok_or_else(|| bad(format!("layout id {layout}")))?;
    let algo = HashAlgo::from_id(algo).ok_or_else(|| bad(format!("hash id {algo}")))?;
    if m > MAX_PARTIAL_BITS {
        return Err(bad(format!(
            "a partial filter of {m} bits, over {MAX_PARTIAL_BITS}"
        )));
    }
    FilterParams::new(layout, m, k, HashSpec { algo, seed }).map_err(|e| bad(e.to_string()))
}

fn put_key(buf: &mut Vec<u8>, key: RunKey) {
    buf.extend_from_slice(&key.scope.to_le_bytes());
    buf.extend_from_slice(&key.token);
}

fn put_len(buf: &mut Vec<u8>, len: usize) -> Result<()> {
    let len = u32::try_from(len).map_err(|_| bad("a field over 4 GiB"))?;
    buf.extend_from_slice(&len.to_le_bytes());
    Ok(())
}

fn put_sized(buf: &mut Vec<u8>, bytes: &[u8]) -> Result<()> {
    put_len(buf, bytes.len())?;
    buf.extend_from_slice(bytes);
    Ok(())
}

/// A bounds-checked cursor.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.0.len() {
            return Err(bad(format!(
                "truncated: {n} bytes needed, {} left",
                self.0.len()
            )));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn end(&self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(bad(format!("{} trailing bytes", self.0.len())))
        }
    }

    fn sized(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests;
