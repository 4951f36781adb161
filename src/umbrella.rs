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
/// family's own enum; `source()` is that enum's source. A host's own errors
/// (its files, channels, sockets) travel in the same type as
/// [`Error::Host`]: see [`Error::host`].
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
/// use filterstore::{Change, Error, FilterStore, Guard, GuardValue, SledDiffStorage, TableSpec};
/// use filterstore::{decode_message, encode_message, BloomRead, CodecChoice};
///
/// fn host(dir: &std::path::Path) -> Result<Option<GuardValue>, Error> {
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
/// assert_eq!(host(dir.path()).unwrap().as_deref(), Some(&b"25"[..]));
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
    /// An error of the host's own, in a function of the host that returns
    /// this type: a file it read, a channel or socket a message came on,
    /// anything beside filterstore's calls ([`Error::host`]; `?` on a
    /// [`std::io::Error`] makes one too, since no filterstore call returns
    /// that type). It displays as the host's error; downcast the box to
    /// match on it.
    #[error(transparent)]
    Host(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Error {
    /// `e`, an error of the host's own, as an [`Error::Host`]: any error
    /// type that is `Send + Sync + 'static`, or a message (`&str`,
    /// `String`). Nothing of filterstore needs to be faked for it.
    ///
    /// # Examples
    /// A host receives a filter over a channel and probes the keys of a
    /// file with it: the channel's error, the file's and the exchange's
    /// reach the caller as one type, each as itself.
    /// ```
    /// use filterstore::{decode_message, encode_message, BitFilter, BloomRead, CodecChoice};
    /// use filterstore::{Error, FilterParams, HashSpec, Layout};
    /// use std::sync::mpsc;
    ///
    /// /// Counts the keys (one per line of `keys`) that the filter received
    /// /// on `rx` may hold.
    /// fn probe_file(rx: &mpsc::Receiver<Vec<u8>>, keys: &std::path::Path) -> Result<usize, Error> {
    ///     let bytes = rx.recv().map_err(Error::host)?; // the channel's RecvError
    ///     let filter = decode_message(&bytes)?.filter()?; // ExchangeError
    ///     let keys = std::fs::read_to_string(keys)?; // std::io::Error
    ///     if keys.is_empty() {
    ///         return Err(Error::host("the key file is empty")); // a message
    ///     }
    ///     Ok(keys.lines().filter(|k| filter.contains(k.as_bytes())).count())
    /// }
    ///
    /// let p = FilterParams::for_capacity(1_000, 0.01, Layout::Blocked, HashSpec::xxh3(7))?;
    /// let sent = BitFilter::new(p)?;
    /// sent.insert(b"alice");
    /// let message = encode_message(&sent, 1, 1, CodecChoice::Auto)?;
    /// let dir = tempfile::tempdir()?;
    /// let file = dir.path().join("keys.txt");
    /// std::fs::write(&file, "alice\n")?;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// tx.send(message.clone())?;
    /// assert_eq!(probe_file(&rx, &file)?, 1);
    ///
    /// // The file is missing: the host's io::Error, as it was.
    /// tx.send(message.clone())?;
    /// let Err(Error::Host(e)) = probe_file(&rx, &dir.path().join("gone.txt")) else {
    ///     panic!("a missing file is the host's error")
    /// };
    /// let io = e.downcast_ref::<std::io::Error>().expect("the io::Error itself");
    /// assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    ///
    /// // The sender hung up: the channel's own error.
    /// drop(tx);
    /// let Err(Error::Host(e)) = probe_file(&rx, &file) else {
    ///     panic!("a closed channel is the host's error")
    /// };
    /// assert!(e.is::<mpsc::RecvError>());
    /// assert_eq!(e.to_string(), "receiving on a closed channel");
    ///
    /// // A message of the host's: it displays as written.
    /// assert_eq!(Error::host("the key file is empty").to_string(), "the key file is empty");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn host(e: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Error {
        Error::Host(e.into())
    }
}

/// `?` on a [`std::io::Error`] in a host's function: the host's own error
/// ([`Error::Host`]), since no call of filterstore returns that type.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Host(Box::new(e))
    }
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
