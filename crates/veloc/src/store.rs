//! One rank's checkpoints in a directory: `NAME-RANK-VERSION.dat`, as
//! VeloC names its per-rank files. Writes are atomic; reads are checked;
//! [`CheckpointStore::latest_intact`] is what `VELOC_Restart_test` asks
//! of one rank.

use crate::atomic_file::write_atomically;
use crate::format::{self, Checkpoint, FormatError, Region};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// VeloC's rule for checkpoint names: `[a-zA-Z0-9_]`, at most
/// `VELOC_MAX_NAME` bytes. It also keeps `-` (the file name's separator)
/// and `/` out.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= format::NAME_BYTES_MAX
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

/// A version that was found but not used, and why (for stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The file refused.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

/// One rank's checkpoint files in one directory.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    directory: PathBuf,
    rank: u32,
}

impl CheckpointStore {
    /// The files of `rank` in `directory` (created on the first write).
    pub fn new(directory: impl Into<PathBuf>, rank: u32) -> CheckpointStore {
        CheckpointStore {
            directory: directory.into(),
            rank,
        }
    }

    /// The directory.
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// The file of version `version` of checkpoint `name`.
    pub fn path(&self, name: &str, version: u32) -> PathBuf {
        self.directory
            .join(format!("{name}-{}-{version}.dat", self.rank))
    }

    /// Write version `version` of `name` atomically; returns its path.
    pub fn write(&self, name: &str, version: u32, regions: &[Region<'_>]) -> io::Result<PathBuf> {
        fs::create_dir_all(&self.directory)?;
        let path = self.path(name, version);
        write_atomically(&path, |writer| {
            format::emit(writer, name, self.rank, version, regions)
        })?;
        Ok(path)
    }

    /// Read and check version `version` of `name`.
    pub fn read(&self, name: &str, version: u32) -> Result<Checkpoint, String> {
        let path = self.path(name, version);
        let bytes = fs::read(&path).map_err(|error| format!("{}: {error}", path.display()))?;
        format::parse(&bytes, (name, self.rank, version))
            .map_err(|error: FormatError| format!("{}: {error}", path.display()))
    }

    /// The versions of `name` this rank has files for, newest first
    /// (whether intact is not checked here).
    pub fn versions(&self, name: &str) -> io::Result<Vec<u32>> {
        let prefix = format!("{name}-{}-", self.rank);
        let entries = match fs::read_dir(&self.directory) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut versions = Vec::new();
        for entry in entries {
            let file_name = entry?.file_name();
            let Some(file_name) = file_name.to_str() else {
                continue;
            };
            let version = file_name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(".dat"))
                .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|digits| digits.parse::<u32>().ok());
            versions.extend(version);
        }
        versions.sort_unstable_by(|a, b| b.cmp(a));
        Ok(versions)
    }

    /// The newest version of `name` at or below `bound` (any when `None`)
    /// whose file is intact, and the newer ones refused on the way (a
    /// corrupt or truncated file is skipped, not fatal).
    pub fn latest_intact(&self, name: &str, bound: Option<u32>) -> (Option<u32>, Vec<Refusal>) {
        let mut refusals = Vec::new();
        let versions = match self.versions(name) {
            Ok(versions) => versions,
            Err(error) => {
                refusals.push(Refusal {
                    path: self.directory.clone(),
                    reason: error.to_string(),
                });
                return (None, refusals);
            }
        };
        for version in versions {
            if bound.is_some_and(|bound| version > bound) {
                continue;
            }
            match self.read(name, version) {
                Ok(_) => return (Some(version), refusals),
                Err(reason) => refusals.push(Refusal {
                    path: self.path(name, version),
                    reason,
                }),
            }
        }
        (None, refusals)
    }

    /// Every (name, version) this rank has a file for, in no order
    /// (whether intact is not checked here).
    pub fn all_checkpoints(&self) -> io::Result<Vec<(String, u32)>> {
        let suffix = format!("-{}-", self.rank);
        let entries = match fs::read_dir(&self.directory) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut found = Vec::new();
        for entry in entries {
            let file_name = entry?.file_name();
            let Some(stem) = file_name.to_str().and_then(|n| n.strip_suffix(".dat")) else {
                continue;
            };
            // Names hold no '-' (valid_name), so the last `-RANK-` splits.
            let Some(split) = stem.rfind(&suffix) else {
                continue;
            };
            let (name, digits) = (&stem[..split], &stem[split + suffix.len()..]);
            if !valid_name(name) || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                continue;
            }
            if let Ok(version) = digits.parse::<u32>() {
                found.push((name.to_string(), version));
            }
        }
        Ok(found)
    }

    /// Remove all but the newest `keep` versions of `name` (VeloC's
    /// `max_versions`); 0 keeps all. Returns how many were removed.
    pub fn prune(&self, name: &str, keep: u32) -> io::Result<usize> {
        if keep == 0 {
            return Ok(0);
        }
        let versions = self.versions(name)?;
        let mut removed = 0;
        for version in versions.into_iter().skip(keep as usize) {
            removed += usize::from(remove_if_there(&self.path(name, version))?);
        }
        Ok(removed)
    }

    /// Remove every version of `name` of this rank (`VELOC_Cleanup`).
    pub fn remove_all(&self, name: &str) -> io::Result<usize> {
        let versions = self.versions(name)?;
        let mut removed = 0;
        for &version in &versions {
            removed += usize::from(remove_if_there(&self.path(name, version))?);
        }
        Ok(removed)
    }
}

/// Remove `path`; whether this call removed it. A file already gone is no
/// error: under `mpiexec --replicas` every replica of a rank runs the same
/// checkpoint calls on the same directory, and its sibling may have
/// pruned the same old version a moment before.
fn remove_if_there(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh directory under the target's temporary space.
    pub(crate) fn scratch_directory(label: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU32, Ordering};
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let directory = std::env::temp_dir().join(format!(
            "resmpi-veloc-{label}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&directory);
        fs::create_dir_all(&directory).unwrap();
        directory
    }

    fn write(store: &CheckpointStore, version: u32, byte: u8) {
        store
            .write(
                "heat",
                version,
                &[Region {
                    id: 1,
                    bytes: &[byte; 64],
                }],
            )
            .unwrap();
    }

    #[test]
    fn names_follow_veloc() {
        assert!(valid_name("heatdis_2"));
        for bad in ["", "a-b", "a/b", "a b", "é"] {
            assert!(!valid_name(bad), "{bad:?} accepted");
        }
    }

    #[test]
    fn newest_intact_at_or_below_the_bound() {
        let directory = scratch_directory("bound");
        let store = CheckpointStore::new(&directory, 2);
        for version in [3, 10, 7] {
            write(&store, version, version as u8);
        }
        // Another rank's and another name's files are not ours.
        write(&CheckpointStore::new(&directory, 12), 20, 0);
        fs::write(directory.join("heat-2-x.dat"), b"junk").unwrap();
        assert_eq!(store.versions("heat").unwrap(), vec![10, 7, 3]);
        assert_eq!(store.latest_intact("heat", None).0, Some(10));
        assert_eq!(store.latest_intact("heat", Some(9)).0, Some(7));
        assert_eq!(store.latest_intact("heat", Some(2)).0, None);
        assert_eq!(store.latest_intact("other", None).0, None);
        assert_eq!(
            store.read("heat", 7).unwrap().region(1),
            Some(&[7u8; 64][..])
        );
    }

    #[test]
    fn a_corrupt_newest_version_falls_back_to_the_older_one() {
        let directory = scratch_directory("corrupt");
        let store = CheckpointStore::new(&directory, 0);
        write(&store, 1, 1);
        write(&store, 2, 2);
        let path = store.path("heat", 2);
        let mut bytes = fs::read(&path).unwrap();
        bytes[40] ^= 1;
        fs::write(&path, bytes).unwrap();
        let (version, refusals) = store.latest_intact("heat", None);
        assert_eq!(version, Some(1));
        assert_eq!(refusals.len(), 1);
        assert!(
            refusals[0].reason.contains("checksum mismatch"),
            "{}",
            refusals[0].reason
        );
    }

    #[test]
    fn a_file_renamed_to_another_version_is_refused() {
        let directory = scratch_directory("renamed");
        let store = CheckpointStore::new(&directory, 0);
        write(&store, 1, 1);
        fs::rename(store.path("heat", 1), store.path("heat", 5)).unwrap();
        assert_eq!(store.latest_intact("heat", None).0, None);
    }

    #[test]
    fn a_version_a_sibling_replica_removed_first_is_no_error() {
        let directory = scratch_directory("sibling");
        let store = CheckpointStore::new(&directory, 0);
        write(&store, 1, 0);
        assert!(remove_if_there(&store.path("heat", 1)).unwrap());
        assert!(!remove_if_there(&store.path("heat", 1)).unwrap());
    }

    #[test]
    fn prune_keeps_the_newest() {
        let directory = scratch_directory("prune");
        let store = CheckpointStore::new(&directory, 0);
        for version in 1..=5 {
            write(&store, version, 0);
        }
        assert_eq!(store.prune("heat", 2).unwrap(), 3);
        assert_eq!(store.versions("heat").unwrap(), vec![5, 4]);
        assert_eq!(store.remove_all("heat").unwrap(), 2);
        assert!(store.versions("heat").unwrap().is_empty());
    }
}
