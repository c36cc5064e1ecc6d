//! Removal of a job's shared-memory segments. Ranks create them as
//! `/dev/shm/resmpi-<JOB_ID>-*` and unlink them on a clean exit; a rank
//! killed with SIGKILL cannot, so mpiexec removes whatever is left once the
//! job is over. The job id is random per job, so this never touches another
//! job's segments.

use std::path::Path;

/// Directory where POSIX shared memory lives on Linux.
pub const SHM_DIRECTORY: &str = "/dev/shm";

/// Removes `<directory>/resmpi-<job_id>-*`; returns how many were removed.
pub fn remove_job_segments(directory: &Path, job_id: &str) -> usize {
    let prefix = format!("resmpi-{job_id}-");
    let Ok(entries) = std::fs::read_dir(directory) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|entry| std::fs::remove_file(entry.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_jobs_segments_are_removed() {
        let directory =
            std::env::temp_dir().join(format!("resmpi-shm-test-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        for name in [
            "resmpi-aaaa-ring0",
            "resmpi-aaaa-x",
            "resmpi-bbbb-ring0",
            "other",
        ] {
            std::fs::write(directory.join(name), b"").unwrap();
        }
        assert_eq!(remove_job_segments(&directory, "aaaa"), 2);
        let mut left: Vec<String> = std::fs::read_dir(&directory)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, vec!["other", "resmpi-bbbb-ring0"]);
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
