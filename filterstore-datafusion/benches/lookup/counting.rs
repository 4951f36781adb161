//! An `ObjectStore` that counts the requests made through it: a GET per
//! `get_opts`, per coalesced group of `get_ranges` (ranges less than 1 MiB
//! apart are one request, as `object_store`'s own `coalesce_ranges` does),
//! a HEAD, a LIST per `list` or `list_with_delimiter` call. It sits below
//! `ThrottledStore` (which passes each call through once) and serves a
//! local file's GET as a stream: `ThrottledStore` 0.13 cannot throttle the
//! file handle `LocalFileSystem` returns (`unimplemented!`).

use async_trait::async_trait;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures::stream::BoxStream;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Requests made, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub get: u64,
    pub head: u64,
    pub list: u64,
}

impl Requests {
    pub fn total(&self) -> u64 {
        self.get + self.head + self.list
    }

    /// Requests other than LIST.
    pub fn reads(&self) -> u64 {
        self.get + self.head
    }

    pub fn since(&self, before: Requests) -> Requests {
        Requests {
            get: self.get - before.get,
            head: self.head - before.head,
            list: self.list - before.list,
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    get: AtomicU64,
    head: AtomicU64,
    list: AtomicU64,
}

/// `inner`, counting its requests.
#[derive(Debug, Clone)]
pub struct Counting {
    inner: Arc<dyn ObjectStore>,
    n: Arc<Counters>,
}

impl Counting {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Counting {
        Counting {
            inner,
            n: Arc::default(),
        }
    }

    pub fn requests(&self) -> Requests {
        Requests {
            get: self.n.get.load(Ordering::Relaxed),
            head: self.n.head.load(Ordering::Relaxed),
            list: self.n.list.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Display for Counting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

/// How many requests `ranges` take when ranges less than 1 MiB apart are
/// fetched together.
fn coalesced(ranges: &[Range<u64>]) -> u64 {
    let mut sorted: Vec<&Range<u64>> = ranges.iter().collect();
    sorted.sort_by_key(|r| r.start);
    let mut groups = 0;
    let mut end: Option<u64> = None;
    for r in sorted {
        match end {
            Some(e) if r.start <= e + (1 << 20) => end = Some(e.max(r.end)),
            _ => {
                groups += 1;
                end = Some(r.end);
            }
        }
    }
    groups
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if std::env::var_os("LOOKUP_TRACE").is_some() {
            println!("GET {location} {:?} head={}", options.range, options.head);
        }
        if options.head {
            self.n.head.fetch_add(1, Ordering::Relaxed);
        } else {
            self.n.get.fetch_add(1, Ordering::Relaxed);
        }
        let got = self.inner.get_opts(location, options).await?;
        let (meta, range, attributes) =
            (got.meta.clone(), got.range.clone(), got.attributes.clone());
        Ok(GetResult {
            payload: GetResultPayload::Stream(got.into_stream()),
            meta,
            range,
            attributes,
        })
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> Result<Vec<prost::bytes::Bytes>> {
        if std::env::var_os("LOOKUP_TRACE").is_some() {
            println!("GET_RANGES {location} {ranges:?}");
        }
        self.n.get.fetch_add(coalesced(ranges), Ordering::Relaxed);
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.n.list.fetch_add(1, Ordering::Relaxed);
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.n.list.fetch_add(1, Ordering::Relaxed);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
