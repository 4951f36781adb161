//! A command's failure: one line for standard error, with the tool's own
//! hints added to the library's errors.

use filterstore::StoreError;

/// A command's failure: one line for standard error.
pub struct Failure(pub String);

impl<E: std::fmt::Display + 'static> From<E> for Failure {
    fn from(e: E) -> Failure {
        let store = (&e as &dyn std::any::Any).downcast_ref::<StoreError>();
        Failure(store.and_then(cli_hint).unwrap_or_else(|| e.to_string()))
    }
}

/// The library's errors speak to any host; the tool adds its own commands.
fn cli_hint(e: &StoreError) -> Option<String> {
    match e {
        StoreError::NoSuchTable(_) => Some(format!("{e}; list the tables with `filterstore list`")),
        StoreError::TooLarge { table, bytes, limit } => Some(format!(
            "the bit filter of table {table:?} would take {bytes} bytes, over the limit of {limit} bytes (a quarter of this machine's memory); size it for fewer keys or a higher --fp, or pass --allow-large"
        )),
        StoreError::Corrupt { what, source } => Some(format!(
            "corrupt {what}: {source}; rebuild the table from its keys (`filterstore drop`, `create`, then `insert` every key, or `import` an exported counting filter), or restore the database from a backup"
        )),
        _ => None,
    }
}

pub type Outcome = Result<(), Failure>;
