//! A record kind's columns declared once: [`record_columns!`] takes each
//! column's name, its [`Column`] type, how a row writes it and how a read
//! row is built from the columns' values, and writes the kind's `fields`,
//! `batch_schema`, `columns` and `rows`. The column types here are the ones
//! the kinds use: [`Time`], [`Utf8`], [`Utf8SinceV2`] (absent from files of
//! the schema before), [`U8`], [`U64`] and [`Oid`].
//!
//! Written as a `macro_rules!` over a small trait rather than a derive: the
//! kinds map fields to columns in ways a derive would need attributes for
//! (two fields in one column, an enum stored as its byte, an oid as 20
//! bytes), and a declarative macro keeps each mapping an expression beside
//! its column.

use std::sync::Arc;

use arrow_array::builder::{
    FixedSizeBinaryBuilder, StringBuilder, TimestampNanosecondBuilder, UInt8Builder, UInt64Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt8Type, UInt64Type};
use arrow_array::{ArrayRef, FixedSizeBinaryArray, PrimitiveArray, RecordBatch, StringArray};
use arrow_schema::{DataType, TimeUnit};

use crate::record::{BatchError, column};

#[doc(hidden)]
pub use arrow_array as __arrow_array;
#[doc(hidden)]
pub use arrow_schema as __arrow_schema;

/// Bytes of a SHA-1 object id, as an [`Oid`] column holds it.
pub const OID_LEN: usize = 20;

/// One column type: its Arrow type, how rows' values are built into an
/// array, and how a read batch's array gives them back.
pub trait Column {
    /// What a row writes.
    type In<'a>;
    /// What a read row gets.
    type Out<'a>;
    type Builder;
    /// The column as read from a batch.
    type Array<'a>;
    /// Whether [`Column::bytes`] says anything (the builder is sized by
    /// it): the columns' sizing pass runs only for those.
    const SIZED: bool = false;

    fn data_type() -> DataType;
    fn bytes(_value: Self::In<'_>) -> usize {
        0
    }
    fn builder(rows: usize, bytes: usize) -> Self::Builder;
    fn append(builder: &mut Self::Builder, value: Self::In<'_>);
    fn finish(builder: Self::Builder) -> ArrayRef;
    fn array<'a>(batch: &'a RecordBatch, name: &'static str)
    -> Result<Self::Array<'a>, BatchError>;
    fn value<'a>(array: &Self::Array<'a>, row: usize) -> Self::Out<'a>;
}

/// Nanoseconds since the epoch, UTC (every kind's `time`).
pub struct Time;

impl Column for Time {
    type In<'a> = i64;
    type Out<'a> = i64;
    type Builder = TimestampNanosecondBuilder;
    type Array<'a> = &'a PrimitiveArray<TimestampNanosecondType>;

    fn data_type() -> DataType {
        DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
    }
    fn builder(rows: usize, _: usize) -> Self::Builder {
        TimestampNanosecondBuilder::with_capacity(rows).with_timezone("UTC")
    }
    fn append(builder: &mut Self::Builder, value: i64) {
        builder.append_value(value);
    }
    fn finish(mut builder: Self::Builder) -> ArrayRef {
        Arc::new(builder.finish())
    }
    fn array<'a>(
        batch: &'a RecordBatch,
        name: &'static str,
    ) -> Result<Self::Array<'a>, BatchError> {
        column(batch, name)?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or(BatchError::Column(name))
    }
    fn value<'a>(array: &Self::Array<'a>, row: usize) -> Self::Out<'a> {
        array.value(row)
    }
}

/// Text. Its builder is sized for exactly the rows' bytes: the default
/// (room for 1,024 values and 1,024 bytes) allocated ~5 KiB per column for
/// a one-row transaction.
pub struct Utf8;

impl Column for Utf8 {
    type In<'a> = &'a str;
    type Out<'a> = &'a str;
    type Builder = StringBuilder;
    type Array<'a> = &'a StringArray;
    const SIZED: bool = true;

    fn data_type() -> DataType {
        DataType::Utf8
    }
    fn bytes(value: &str) -> usize {
        value.len()
    }
    fn builder(rows: usize, bytes: usize) -> Self::Builder {
        StringBuilder::with_capacity(rows, bytes)
    }
    fn append(builder: &mut Self::Builder, value: &str) {
        builder.append_value(value);
    }
    fn finish(mut builder: Self::Builder) -> ArrayRef {
        Arc::new(builder.finish())
    }
    fn array<'a>(
        batch: &'a RecordBatch,
        name: &'static str,
    ) -> Result<Self::Array<'a>, BatchError> {
        crate::record::utf8(batch, name)
    }
    fn value<'a>(array: &Self::Array<'a>, row: usize) -> Self::Out<'a> {
        array.value(row)
    }
}

/// Text added in a kind's second schema version: a batch of the first has
/// no such column, and its rows read it as empty.
pub struct Utf8SinceV2;

impl Column for Utf8SinceV2 {
    type In<'a> = &'a str;
    type Out<'a> = &'a str;
    type Builder = StringBuilder;
    type Array<'a> = Option<&'a StringArray>;
    const SIZED: bool = true;

    fn data_type() -> DataType {
        DataType::Utf8
    }
    fn bytes(value: &str) -> usize {
        value.len()
    }
    fn builder(rows: usize, bytes: usize) -> Self::Builder {
        StringBuilder::with_capacity(rows, bytes)
    }
    fn append(builder: &mut Self::Builder, value: &str) {
        builder.append_value(value);
    }
    fn finish(mut builder: Self::Builder) -> ArrayRef {
        Arc::new(builder.finish())
    }
    fn array<'a>(
        batch: &'a RecordBatch,
        name: &'static str,
    ) -> Result<Self::Array<'a>, BatchError> {
        batch
            .column_by_name(name)
            .map(|_| crate::record::utf8(batch, name))
            .transpose()
    }
    fn value<'a>(array: &Self::Array<'a>, row: usize) -> Self::Out<'a> {
        array.map_or("", |array| array.value(row))
    }
}

/// An unsigned integer column: `$name` holds `$native`s.
macro_rules! unsigned_column {
    ($(#[$doc:meta])* $name:ident, $native:ty, $arrow:ident, $builder:ident, $data_type:ident) => {
        $(#[$doc])*
        pub struct $name;

        impl Column for $name {
            type In<'a> = $native;
            type Out<'a> = $native;
            type Builder = $builder;
            type Array<'a> = &'a PrimitiveArray<$arrow>;

            fn data_type() -> DataType {
                DataType::$data_type
            }
            fn builder(rows: usize, _: usize) -> Self::Builder {
                $builder::with_capacity(rows)
            }
            fn append(builder: &mut Self::Builder, value: $native) {
                builder.append_value(value);
            }
            fn finish(mut builder: Self::Builder) -> ArrayRef {
                Arc::new(builder.finish())
            }
            fn array<'a>(
                batch: &'a RecordBatch,
                name: &'static str,
            ) -> Result<Self::Array<'a>, BatchError> {
                column(batch, name)?
                    .as_primitive_opt::<$arrow>()
                    .ok_or(BatchError::Column(name))
            }
            fn value<'a>(array: &Self::Array<'a>, row: usize) -> Self::Out<'a> {
                array.value(row)
            }
        }
    };
}

unsigned_column!(
    /// A byte.
    U8, u8, UInt8Type, UInt8Builder, UInt8
);
unsigned_column!(
    /// An unsigned 64-bit number.
    U64, u64, UInt64Type, UInt64Builder, UInt64
);

/// An object id's 20 raw bytes (git's all-zero id for none).
pub struct Oid;

impl Column for Oid {
    type In<'a> = [u8; OID_LEN];
    type Out<'a> = &'a [u8];
    type Builder = FixedSizeBinaryBuilder;
    type Array<'a> = &'a FixedSizeBinaryArray;

    fn data_type() -> DataType {
        DataType::FixedSizeBinary(OID_LEN as i32)
    }
    fn builder(rows: usize, _: usize) -> Self::Builder {
        FixedSizeBinaryBuilder::with_capacity(rows, OID_LEN as i32)
    }
    fn append(builder: &mut Self::Builder, value: [u8; OID_LEN]) {
        builder
            .append_value(value)
            .expect("an Oid column's values are OID_LEN bytes");
    }
    fn finish(mut builder: Self::Builder) -> ArrayRef {
        Arc::new(builder.finish())
    }
    fn array<'a>(
        batch: &'a RecordBatch,
        name: &'static str,
    ) -> Result<Self::Array<'a>, BatchError> {
        column(batch, name)?
            .as_fixed_size_binary_opt()
            .filter(|a| a.value_length() == OID_LEN as i32)
            .ok_or(BatchError::Column(name))
    }
    fn value<'a>(array: &Self::Array<'a>, row: usize) -> Self::Out<'a> {
        array.value(row)
    }
}

/// A record kind's `fields`, `batch_schema`, `columns` and `rows`, from one
/// list of its columns, inside its `impl RecordKind`:
///
/// ```text
/// vole_log::record_columns! {
///     |r| {
///         time: Time("time") = r.time_ns,
///         event: Utf8("event") = &r.event,
///     }
///     |row| Ok(AuditEvent { time_ns: time, event: event.to_string() })
/// }
/// ```
///
/// Each column is `variable: Type("name") = what a row writes`, optionally
/// followed by `; bytes n` (the bytes a row's text takes, when the
/// written expression is costly to evaluate twice). In the read expression
/// each variable is the row's value of its column and `row` (as named) the
/// row's index; it returns `Result<Self, BatchError>`.
#[macro_export]
macro_rules! record_columns {
    (
        |$r:ident| {
            $( $var:ident : $col:ident ( $name:literal ) = $write:expr $(; bytes $bytes:expr)? ),* $(,)?
        }
        |$row:ident| $read:expr
    ) => {
        fn fields() -> Vec<$crate::columns::__arrow_schema::Field> {
            vec![$(
                $crate::columns::__arrow_schema::Field::new(
                    $name,
                    <$crate::columns::$col as $crate::columns::Column>::data_type(),
                    false,
                )
            ),*]
        }

        fn batch_schema() -> $crate::columns::__arrow_schema::SchemaRef {
            static SCHEMA: std::sync::OnceLock<$crate::columns::__arrow_schema::SchemaRef> =
                std::sync::OnceLock::new();
            $crate::record::schema_once(&SCHEMA, Self::fields)
        }

        fn columns(rows: &[Self]) -> Vec<$crate::columns::__arrow_array::ArrayRef> {
            $(
                let mut $var = {
                    use $crate::columns::Column as _;
                    let bytes = if <$crate::columns::$col>::SIZED {
                        rows.iter()
                            .map(|$r| $crate::record_columns!(@bytes $col, $write $(, $bytes)?))
                            .sum::<usize>()
                    } else {
                        0
                    };
                    <$crate::columns::$col>::builder(rows.len(), bytes)
                };
            )*
            for $r in rows {
                $(
                    <$crate::columns::$col as $crate::columns::Column>::append(&mut $var, $write);
                )*
            }
            vec![$(
                <$crate::columns::$col as $crate::columns::Column>::finish($var)
            ),*]
        }

        fn rows(
            batch: &$crate::columns::__arrow_array::RecordBatch,
        ) -> Result<Vec<Self>, $crate::record::BatchError> {
            $(
                let $var = <$crate::columns::$col as $crate::columns::Column>::array(batch, $name)?;
            )*
            (0..batch.num_rows())
                .map(|$row| {
                    $(
                        let $var =
                            <$crate::columns::$col as $crate::columns::Column>::value(&$var, $row);
                    )*
                    $read
                })
                .collect()
        }
    };
    (@bytes $col:ident, $write:expr) => {
        <$crate::columns::$col as $crate::columns::Column>::bytes($write)
    };
    (@bytes $col:ident, $write:expr, $bytes:expr) => {
        $bytes
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordKind;

    #[derive(Debug, Clone, PartialEq)]
    struct Sample {
        time_ns: i64,
        name: String,
        id: Option<u8>,
        count: u64,
        since: String,
    }

    impl RecordKind for Sample {
        const KIND: &'static str = "sample";
        const FILE_NAME: &'static str = "sample.arrow";
        const SCHEMA_VERSION: u32 = 2;

        crate::record_columns! {
            |r| {
                time: Time("time") = r.time_ns,
                name: Utf8("name") = &r.name; bytes r.name.len(),
                id: Oid("id") = [r.id.unwrap_or(0); OID_LEN],
                count: U64("count") = r.count,
                since: Utf8SinceV2("since") = &r.since,
            }
            |row| Ok(Sample {
                time_ns: time,
                name: name.to_string(),
                id: (id[0] != 0).then_some(id[0]),
                count: count + u64::from(row == usize::MAX),
                since: since.to_string(),
            })
        }
    }

    fn samples() -> Vec<Sample> {
        vec![
            Sample {
                time_ns: 1,
                name: "a".into(),
                id: Some(7),
                count: 3,
                since: "new".into(),
            },
            Sample {
                time_ns: -5,
                name: String::new(),
                id: None,
                count: u64::MAX,
                since: String::new(),
            },
        ]
    }

    #[test]
    fn rows_round_trip_through_the_declared_columns() {
        let fields = Sample::fields();
        let names: Vec<_> = fields.iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["time", "name", "id", "count", "since"]);
        assert_eq!(fields[2].data_type(), &DataType::FixedSizeBinary(20));
        let batch = Sample::batch(&samples()).unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(Sample::rows(&batch).unwrap(), samples());
    }

    #[test]
    fn a_column_added_in_version_2_reads_as_empty_from_a_batch_without_it() {
        let batch = Sample::batch(&samples()).unwrap();
        let old = batch.project(&[0, 1, 2, 3]).unwrap();
        let rows = Sample::rows(&old).unwrap();
        assert_eq!(rows[0].since, "", "read as empty");
        assert_eq!(rows[0].name, "a");
        // Any other column missing is an error that names it.
        let broken = batch.project(&[0, 2, 3, 4]).unwrap();
        let err = Sample::rows(&broken).unwrap_err().to_string();
        assert!(err.contains("\"name\""), "{err}");
    }
}
