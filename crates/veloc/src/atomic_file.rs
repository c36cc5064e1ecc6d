//! Write a file so that under its final name it is either the old one or
//! the whole new one: temporary name in the same directory, `fsync`,
//! `rename`, `fsync` of the directory (a rename is only durable once its
//! directory is).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Write `path` through `fill`, atomically and durably. A failure leaves
/// no temporary behind and the old file (if any) untouched.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let directory = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?
        .to_string_lossy();
    // The process id keeps two incarnations of a rank (an old one not yet
    // reaped, its replacement) from writing one temporary file.
    let temporary = directory.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = (|| {
        let file = File::create(&temporary)?;
        let mut writer = BufWriter::with_capacity(1 << 20, file);
        fill(&mut writer)?;
        let file = writer.into_inner().map_err(|error| error.into_error())?;
        file.sync_all()?;
        fs::rename(&temporary, path)?;
        File::open(directory)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_fill_leaves_the_old_file_and_no_temporary() {
        let directory = crate::store::tests::scratch_directory("atomic");
        let path = directory.join("file");
        write_atomically(&path, |writer| writer.write_all(b"old")).unwrap();
        let error = write_atomically(&path, |writer| {
            writer.write_all(b"new, half")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(error.to_string(), "disk full");
        assert_eq!(fs::read(&path).unwrap(), b"old");
        let names: Vec<_> = fs::read_dir(&directory)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("file")]);
    }
}
