//! The file's tail: the filters' places in the footer, the footer written
//! again to point at them, and the output kept back while `ArrowWriter`
//! writes its own tail.

use crate::error::Result;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataWriter};
use std::io::{self, Write};

/// A filter written to the file: at byte `at`, `len` bytes, for column
/// chunk `leaf` of row group `group`, or of every row group when `None`.
pub(super) struct Placed {
    pub(super) group: Option<usize>,
    pub(super) leaf: usize,
    pub(super) at: usize,
    pub(super) len: usize,
}

/// `metadata` with each placed filter's column chunk (of its row group, or
/// of every row group) pointing at it.
pub(super) fn with_filters(
    metadata: ParquetMetaData,
    placed: &[Placed],
) -> Result<ParquetMetaData> {
    let mut b = metadata.into_builder();
    let mut groups = b.take_row_groups();
    for p in placed {
        let (at, len) = (p.at, p.len);
        let offset =
            i64::try_from(at).map_err(|_| ParquetError::General(format!("filter offset {at}")))?;
        let length = i32::try_from(len)
            .map_err(|_| ParquetError::General(format!("filter length {len}")))?;
        let range = match p.group {
            Some(g) if g < groups.len() => g..g + 1,
            Some(g) => return Err(ParquetError::General(format!("no row group {g}")).into()),
            None => 0..groups.len(),
        };
        for group in &mut groups[range] {
            let chunk = group
                .columns_mut()
                .get_mut(p.leaf)
                .ok_or_else(|| ParquetError::General(format!("no column chunk {}", p.leaf)))?;
            *chunk = chunk
                .clone()
                .into_builder()
                .set_bloom_filter_offset(Some(offset))
                .set_bloom_filter_length(Some(length))
                .build()?;
        }
    }
    Ok(b.set_row_groups(groups).build())
}

/// The footer of `metadata` (Thrift `FileMetaData`, its length, `PAR1`),
/// its page indexes left where `ArrowWriter` wrote them.
pub(super) fn encode_footer(
    metadata: &ParquetMetaData,
    write_path_in_schema: bool,
) -> Result<Vec<u8>> {
    let bare = metadata
        .clone()
        .into_builder()
        .set_column_index(None)
        .set_offset_index(None)
        .build();
    let mut footer = Vec::new();
    ParquetMetaDataWriter::new(&mut footer, &bare)
        .with_write_path_in_schema(write_path_in_schema)
        .finish()?;
    Ok(footer)
}

/// Where the footer (`FileMetaData`, its length, `PAR1`) starts in `tail`,
/// the bytes `ArrowWriter` wrote at close.
pub(super) fn footer_start(tail: &[u8]) -> Result<usize> {
    let n = tail.len();
    let start = match tail {
        [.., a, b, c, d, b'P', b'A', b'R', b'1'] => {
            let len = u32::from_le_bytes([*a, *b, *c, *d]) as usize;
            n.checked_sub(8).and_then(|end| end.checked_sub(len))
        }
        _ => None,
    };
    start.ok_or_else(|| {
        ParquetError::General(format!(
            "ArrowWriter's {n}-byte file tail does not end in a Parquet footer"
        ))
        .into()
    })
}

/// [`Write`] through an [`ArrowWriter`], which counts the bytes.
pub(super) struct Counted<'a, W: Write + Send>(pub(super) &'a mut ArrowWriter<Tail<W>>);

impl<W: Write + Send> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The output, passed through until [`Tail::hold`], then kept back.
pub(super) struct Tail<W> {
    out: Option<W>,
    held: Option<Vec<u8>>,
}

impl<W: Write> Tail<W> {
    pub(super) fn new(out: W) -> Self {
        Self {
            out: Some(out),
            held: None,
        }
    }

    pub(super) fn hold(&mut self) {
        self.held = Some(Vec::new());
    }

    pub(super) fn take_held(&mut self) -> Vec<u8> {
        self.held.take().unwrap_or_default()
    }

    pub(super) fn take_out(&mut self) -> io::Result<W> {
        self.out.take().ok_or_else(gone)
    }
}

fn gone() -> io::Error {
    io::Error::other("the Parquet output was already handed back")
}

impl<W: Write> Write for Tail<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.held {
            Some(held) => {
                held.try_reserve(buf.len()).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        "no memory to hold the Parquet file's tail",
                    )
                })?;
                held.extend_from_slice(buf);
                Ok(buf.len())
            }
            None => self.out.as_mut().ok_or_else(gone)?.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match (&self.held, &mut self.out) {
            (Some(_), _) => Ok(()),
            (None, Some(out)) => out.flush(),
            (None, None) => Err(gone()),
        }
    }
}
