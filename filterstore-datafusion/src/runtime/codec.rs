//! How a [`BloomFilterExec`] crosses to a worker inside its task's plan: a
//! `PhysicalExtensionCodec` that datafusion-distributed composes with its
//! own (`with_distributed_user_codec`), on the coordinator and on every
//! worker ([`crate::BloomStateBuilderExt::with_bloom_functions`] installs
//! it).
//!
//! The bytes (little-endian; every length is checked against the bytes
//! left before anything is sliced or allocated):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `FSRF` |
//! | 1 | version, 1 |
//! | 1 | flags: bit 0 = null keys pass; other bits zero |
//! | 4 + n | label, UTF-8 |
//! | 4 | number of key expressions (≥ 1) |
//! | per key: 4 + n | the expression as DataFusion's `PhysicalExprNode` protobuf |
//! | 4 + n | the filter message (docs/FORMAT.md § 12) |
//!
//! A [`BloomBuildExec`] (the creation side's partial filter) is encoded the
//! same way with magic `FSRB`: version, flags (zero), the number of key
//! expressions and each expression, then the filter's shape: layout id (1),
//! `m` (8), `k` (4), hash algorithm id (1), seed (8). The shape is checked
//! by `FilterParams::new` and capped at [`MAX_PARTIAL_BITS`] before the
//! partial filter is allocated.
//!
//! Coordinator and workers run the same build within one query, so the
//! version only guards against a mixed deployment, which it refuses.

use super::build::BloomBuildExec;
use super::exec::BloomFilterExec;
use datafusion::arrow::datatypes::Schema;
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

const MAGIC: &[u8; 4] = b"FSRF";
const BUILD_MAGIC: &[u8; 4] = b"FSRB";
/// The largest partial filter a decoded plan may ask a worker to allocate:
/// 2^33 bits, 1 GiB.
pub const MAX_PARTIAL_BITS: u64 = 1 << 33;
const VERSION: u8 = 1;
const NULLS_PASS: u8 = 1;

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
        let mut r = Reader(buf);
        let magic = r.take(4)?;
        let is_build = magic == BUILD_MAGIC;
        if magic != MAGIC && !is_build {
            return Err(bad("not a filterstore runtime-filter node"));
        }
        let version = r.u8()?;
        if version != VERSION {
            return Err(bad(format!(
                "node version {version}, this build reads {VERSION}: run one filterstore-datafusion build on the coordinator and every worker"
            )));
        }
        let flags = r.u8()?;
        if flags & !NULLS_PASS != 0 || (is_build && flags != 0) {
            return Err(bad(format!("unknown flags {flags:#04x}")));
        }
        if is_build {
            let keys = decode_keys(&mut r, &input.schema(), ctx, proto_converter)?;
            let params = decode_params(&mut r)?;
            r.end()?;
            return Ok(Arc::new(BloomBuildExec::try_new(
                Arc::clone(input),
                keys,
                params,
            )?));
        }
        let label = String::from_utf8(r.sized()?.to_vec()).map_err(|_| bad("label not UTF-8"))?;
        let keys = decode_keys(&mut r, &input.schema(), ctx, proto_converter)?;
        let message = r.sized()?.to_vec();
        r.end()?;
        let node = BloomFilterExec::try_new(
            Arc::clone(input),
            keys,
            Arc::new(message),
            flags & NULLS_PASS != 0,
            label,
        )?;
        Ok(Arc::new(node))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(b) = node.downcast_ref::<BloomBuildExec>() {
            buf.extend_from_slice(BUILD_MAGIC);
            buf.push(VERSION);
            buf.push(0);
            encode_keys(buf, b.keys(), proto_converter)?;
            let p = b.params();
            buf.push(p.layout().id());
            buf.extend_from_slice(&p.m().to_le_bytes());
            buf.extend_from_slice(&p.k().to_le_bytes());
            buf.push(p.hash().algo.id());
            buf.extend_from_slice(&p.hash().seed.to_le_bytes());
            return Ok(());
        }
        let Some(node) = node.downcast_ref::<BloomFilterExec>() else {
            return Err(bad(format!("cannot encode {}", node.name())));
        };
        buf.extend_from_slice(MAGIC);
        buf.push(VERSION);
        buf.push(if node.nulls_pass() { NULLS_PASS } else { 0 });
        put_sized(buf, node.label().as_bytes())?;
        encode_keys(buf, node.keys(), proto_converter)?;
        put_sized(buf, node.message())?;
        Ok(())
    }
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
