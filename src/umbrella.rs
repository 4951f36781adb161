//! The umbrella error: every family of this crate's errors in one type, for
//! hosts that want a single error type. It names the families of every
//! layer, so it sits above them all, beside the crate root; each family
//! stays in its layer (`error.rs` at the bottom for the filters and codec).

use crate::error::{CodecError, FilterError, ParamError};
use crate::exchange::message::ExchangeError;
#[cfg(feature = "store")]
use crate::guard::{GuardError, SledDiffError};
#[cfg(feature = "store")]
use crate::store::StoreError;
use thiserror::Error;

/// Every error of this crate in one type, for hosts that want a single error
/// type (`?` converts each family into it). Match on the variant to reach the
/// family's own enum; `source()` is that enum's source.
///
/// # Examples
/// ```
/// use filterstore::{Error, FilterParams, HashSpec, Layout};
///
/// fn size(n: u64, fp: f64) -> Result<u64, Error> {
///     Ok(FilterParams::for_capacity(n, fp, Layout::Blocked, HashSpec::xxh3(7))?.m())
/// }
/// assert!(matches!(size(0, 0.01), Err(Error::Param(_))));
/// assert_eq!(size(0, 0.01).unwrap_err().to_string(), "expected number of keys must be at least 1");
/// ```
///
/// With the `store` feature, one error type reaches across the store, the
/// differential-file guard and the exchange:
/// ```
/// # #[cfg(feature = "store")] {
/// use filterstore::{Change, Error, FilterStore, Guard, SledDiffStorage, TableSpec};
/// use filterstore::{decode_message, encode_message, BloomRead, CodecChoice};
///
/// fn host(dir: &std::path::Path) -> Result<Option<Vec<u8>>, Error> {
///     let store = FilterStore::open(dir)?; // StoreError
///     let storage = SledDiffStorage::open(&store, "accounts")?; // StoreError
///     storage.load_base([(b"alice".to_vec(), b"10".to_vec())])?; // SledDiffError
///     let spec = TableSpec::new(1_000, 0.01);
///     let guard = Guard::open(storage, store.open_or_create_table("accounts-changed", spec)?)?;
///     guard.write(&[(b"bob".to_vec(), Change::Put(b"25".to_vec()))])?; // GuardError<_>
///     let sent = encode_message(&guard.table().bloom(), 1, 1, CodecChoice::Auto)?; // ExchangeError
///     assert!(decode_message(&sent)?.filter()?.contains(b"bob"));
///     Ok(guard.read(b"bob")?) // GuardError<SledDiffError>
/// }
///
/// let dir = tempfile::tempdir().expect("a temporary directory");
/// assert_eq!(host(dir.path()).unwrap(), Some(b"25".to_vec()));
/// // A second open of the same store in this process: a typed store error.
/// let _open = FilterStore::open(dir.path()).unwrap();
/// assert!(matches!(host(dir.path()), Err(Error::Store(_))));
/// # }
/// ```
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// Invalid filter parameters.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// An operation on filters failed (incompatible filters, absent key).
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// Bytes that are not a valid record or filter file.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// Building, decoding or applying an exchange message failed.
    #[error(transparent)]
    Exchange(#[from] ExchangeError),
    /// The persistent store failed (feature `store`); also a
    /// [`GuardError::Store`].
    #[cfg(feature = "store")]
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The differential-file storage inside the store failed (feature
    /// `store`): a [`SledDiffStorage`](crate::guard::SledDiffStorage) call, or a
    /// [`Guard`](crate::guard::Guard) call over one.
    #[cfg(feature = "store")]
    #[error(transparent)]
    SledDiff(#[from] SledDiffError),
    /// The host's own [`DiffStorage`](crate::guard::DiffStorage) under a
    /// [`Guard`](crate::guard::Guard) failed: its error, boxed
    /// ([`GuardError::Storage`]). Downcast it to
    /// the storage's `Error` type to match on it.
    #[cfg(feature = "store")]
    #[error("storage: {0}")]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
}

/// A guard's error in the umbrella type: [`GuardError::Store`]
/// becomes [`Error::Store`]; [`GuardError::Storage`]
/// becomes [`Error::SledDiff`] when the storage is a
/// [`SledDiffStorage`](crate::guard::SledDiffStorage), else [`Error::Storage`] with
/// the host's error boxed. Each displays as the error it wraps.
#[cfg(feature = "store")]
impl<E> From<GuardError<E>> for Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(e: GuardError<E>) -> Self {
        match e {
            GuardError::Store(s) => Error::Store(s),
            GuardError::Storage(s) => {
                let boxed: Box<dyn std::error::Error + Send + Sync + 'static> = Box::new(s);
                match boxed.downcast::<SledDiffError>() {
                    Ok(sled_diff) => Error::SledDiff(*sled_diff),
                    Err(other) => Error::Storage(other),
                }
            }
        }
    }
}
