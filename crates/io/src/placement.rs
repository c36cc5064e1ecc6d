//! Where the copies of a replicated file's blocks live, and the metadata
//! that lets a later job find them without being given the hints again.
//!
//! Copy 0 of every block is the file at the path the application opened:
//! it stays an ordinary file, byte-identical to an unreplicated write, so
//! any tool can read it. Copies 1..R go to the storage targets (directories,
//! in practice mount points of separate devices or servers): copy `k` of
//! block `b` lives on target `(b + k - 1) mod T`. With at least R − 1
//! targets, the R copies of a block are on R different failure domains
//! (the primary's and R − 1 distinct targets), so any R − 1 lost domains
//! leave every block readable; rotating by block spreads the replica load
//! over all targets when there are more than R − 1 of them, as the paper
//! rotates replicas over the stripes of a parallel file system.
//!
//! A target holds its blocks at their own offsets in a sparse file named
//! after the primary's absolute path, so a block needs no index to be
//! found. Beside each copy's data lies its checksum file: 8 bytes per block
//! (a marker and the block's CRC32C).

use std::path::{Path, PathBuf};

/// Block size when the hints give none (`striping_unit`).
pub const DEFAULT_BLOCK_SIZE_BYTES: u64 = 1 << 20;

/// A replicated file's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaLayout {
    /// Copies of every block, the primary included (R).
    pub replication_factor: u32,
    /// Bytes per block: the unit of placement and of checksums.
    pub block_size_bytes: u64,
    /// Directories holding copies 1..R, absolute.
    pub targets: Vec<PathBuf>,
}

/// Where one copy of a block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyLocation {
    /// The file at the user's path.
    Primary,
    /// The replica file on target `n`.
    Target(usize),
}

impl ReplicaLayout {
    /// A layout, checked: R ≥ 2, a block size, and enough targets for R − 1
    /// copies on distinct targets.
    pub fn new(
        replication_factor: u32,
        block_size_bytes: u64,
        targets: Vec<PathBuf>,
    ) -> Result<ReplicaLayout, String> {
        if replication_factor < 2 {
            return Err(format!(
                "replication_factor {replication_factor} needs no layout (it must be at least 2)"
            ));
        }
        if replication_factor > 16 {
            return Err(format!(
                "replication_factor {replication_factor} is more than the 16 copies supported"
            ));
        }
        if block_size_bytes == 0 || block_size_bytes > 1 << 30 {
            return Err(format!(
                "block size (striping_unit) {block_size_bytes} is not in 1..=2^30 bytes"
            ));
        }
        if targets.len() + 1 < replication_factor as usize {
            return Err(format!(
                "replication_factor {replication_factor} needs at least {} storage targets \
                 (resmpi_replica_targets), {} given",
                replication_factor - 1,
                targets.len()
            ));
        }
        Ok(ReplicaLayout {
            replication_factor,
            block_size_bytes,
            targets,
        })
    }

    /// Where copy `copy` (0..R) of block `block` lives.
    pub fn location(&self, block: u64, copy: u32) -> CopyLocation {
        if copy == 0 {
            return CopyLocation::Primary;
        }
        let targets = self.targets.len() as u64;
        CopyLocation::Target(((block + u64::from(copy) - 1) % targets) as usize)
    }

    /// Which copy of `block`, if any, target `target` holds.
    pub fn copy_on_target(&self, block: u64, target: usize) -> Option<u32> {
        (1..self.replication_factor)
            .find(|copy| self.location(block, *copy) == CopyLocation::Target(target))
    }

    /// The metadata text kept with the file.
    pub fn encode(&self) -> String {
        let targets: Vec<String> = self
            .targets
            .iter()
            .map(|target| target.display().to_string())
            .collect();
        format!(
            "resmpi-io replicated file 1\nlayout=targets\nreplication_factor={}\nblock_size_bytes={}\ntargets={}\n",
            self.replication_factor,
            self.block_size_bytes,
            targets.join(",")
        )
    }

    /// Parse [`ReplicaLayout::encode`]'s text.
    pub fn decode(text: &str) -> Result<ReplicaLayout, String> {
        let mut lines = text.lines();
        if lines.next() != Some("resmpi-io replicated file 1") {
            return Err("not resmpi-io metadata (version 1)".into());
        }
        let (mut factor, mut block, mut targets) = (None, None, None);
        for line in lines {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("metadata line {line:?} is not key=value"))?;
            match key {
                "layout" if value == "targets" => {}
                "layout" => return Err(format!("unknown layout {value:?}")),
                "replication_factor" => factor = value.parse().ok(),
                "block_size_bytes" => block = value.parse().ok(),
                "targets" => targets = Some(parse_targets(value)),
                _ => {}
            }
        }
        match (factor, block, targets) {
            (Some(factor), Some(block), Some(targets)) => {
                ReplicaLayout::new(factor, block, targets)
            }
            _ => Err("metadata lacks replication_factor, block_size_bytes or targets".into()),
        }
    }
}

/// A comma-separated list of directories (empty entries skipped).
pub fn parse_targets(list: &str) -> Vec<PathBuf> {
    list.split(',')
        .map(str::trim)
        .filter(|target| !target.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// The names of every file a replicated file consists of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileNames {
    /// The user's path (copy 0's data).
    pub primary: PathBuf,
    /// Copy 0's checksums.
    pub primary_checksums: PathBuf,
    /// The layout metadata beside the primary.
    pub metadata: PathBuf,
    /// The lock file that serializes block updates between processes.
    pub lock: PathBuf,
    /// The shared file pointer.
    pub shared_pointer: PathBuf,
    /// Replica data on each target; its checksums and metadata copy add
    /// `.crc` and `.meta`.
    pub replicas: Vec<PathBuf>,
}

/// 64-bit FNV-1a: a stable name for a path on every target.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `path` made absolute without needing it to exist.
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|dir| dir.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// Side files next to `primary`: `.NAME.resmpi-SUFFIX`.
fn side_file(primary: &Path, suffix: &str) -> PathBuf {
    let name = primary
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    primary.with_file_name(format!(".{name}.resmpi-{suffix}"))
}

impl FileNames {
    /// The names for the file at `primary` with `targets`.
    pub fn new(primary: &Path, targets: &[PathBuf]) -> FileNames {
        let primary = absolute(primary);
        let name = primary
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        let hash = fnv1a(primary.as_os_str().as_encoded_bytes());
        FileNames {
            primary_checksums: side_file(&primary, "crc"),
            metadata: side_file(&primary, "meta"),
            lock: side_file(&primary, "lock"),
            shared_pointer: side_file(&primary, "shfp"),
            replicas: targets
                .iter()
                .map(|target| target.join(format!("{name}.{hash:016x}")))
                .collect(),
            primary,
        }
    }
}

/// `path` with `suffix` appended to its name.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(factor: u32, targets: usize) -> ReplicaLayout {
        ReplicaLayout::new(
            factor,
            4096,
            (0..targets)
                .map(|n| PathBuf::from(format!("/t{n}")))
                .collect(),
        )
        .unwrap()
    }

    /// Every set of R − 1 lost failure domains (domain 0 = the primary,
    /// 1..=T = the targets) leaves a copy of every block.
    #[test]
    fn any_r_minus_one_lost_domains_leave_every_block_readable() {
        for factor in 2..=4u32 {
            for targets in (factor as usize - 1)..=6 {
                let layout = layout(factor, targets);
                let domains = targets + 1;
                for lost in 0u32..(1 << domains) {
                    if lost.count_ones() != factor - 1 {
                        continue;
                    }
                    for block in 0..20 {
                        let survives = (0..factor).any(|copy| {
                            let domain = match layout.location(block, copy) {
                                CopyLocation::Primary => 0,
                                CopyLocation::Target(n) => n + 1,
                            };
                            lost & (1 << domain) == 0
                        });
                        assert!(
                            survives,
                            "R={factor} T={targets} lost={lost:b} block={block}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn copies_rotate_over_targets() {
        let layout = layout(2, 3);
        let targets: Vec<CopyLocation> = (0..4).map(|block| layout.location(block, 1)).collect();
        assert_eq!(
            targets,
            vec![
                CopyLocation::Target(0),
                CopyLocation::Target(1),
                CopyLocation::Target(2),
                CopyLocation::Target(0)
            ]
        );
        assert_eq!(layout.copy_on_target(1, 1), Some(1));
        assert_eq!(layout.copy_on_target(1, 0), None);
    }

    #[test]
    fn bad_layouts_are_refused() {
        assert!(ReplicaLayout::new(1, 4096, vec![]).is_err());
        assert!(ReplicaLayout::new(3, 4096, vec![PathBuf::from("/a")]).is_err());
        assert!(ReplicaLayout::new(2, 0, vec![PathBuf::from("/a")]).is_err());
    }

    #[test]
    fn metadata_round_trips() {
        let layout = layout(3, 4);
        assert_eq!(ReplicaLayout::decode(&layout.encode()).unwrap(), layout);
        assert!(ReplicaLayout::decode("something else").is_err());
    }

    #[test]
    fn names_are_stable_and_beside_the_file() {
        let names = FileNames::new(Path::new("/data/run/out.h5"), &[PathBuf::from("/t0")]);
        assert_eq!(
            names.metadata,
            PathBuf::from("/data/run/.out.h5.resmpi-meta")
        );
        assert!(names.replicas[0].starts_with("/t0"));
        assert_eq!(
            names,
            FileNames::new(Path::new("/data/run/out.h5"), &[PathBuf::from("/t0")])
        );
    }
}
