//! MPI_Comm_spawn(_multiple): the request the root makes, judged before
//! anything would start, and the one outcome every member of the parent
//! communicator returns.
//!
//! Why judge first and in one place: the call is collective, and a member
//! that is not the root knows nothing of the request (the standard makes
//! the arguments significant at the root only). So the root decides, as a
//! pure function of the request, the room left in the universe and what
//! the file system says ([`FileSystem`], faked in the tests), and then
//! broadcasts `[ok, processes, message]` over the parent communicator:
//! every member returns the same error class and text at once, with every
//! error code set, and nobody waits for a process that will never start.
//!
//! What is judged, in the order a user would fix it: a command that
//! cannot be found or run, a `wdir` that is not a directory, a `host`
//! that is not this job's, the launcher (only resmpi's `mpiexec` could
//! start processes: under others the universe means nothing to resmpi),
//! and more processes than `MPI_UNIVERSE_SIZE` leaves room for. Starting processes is not built (see
//! docs/design.md, "Spawn"), so a request that passes every check is
//! still refused, with a message saying so; under hydra, Slurm or a
//! singleton (no `RESMPI_JOB_ID`) the message says that spawn needs
//! resmpi's own `mpiexec`.

use std::path::{Path, PathBuf};

use crate::error::{ErrorClass, MpiError, MpiResult};

/// Longest message the root broadcasts with its verdict (longer ones are
/// cut at a character boundary).
pub const VERDICT_MESSAGE_MAX_BYTES: usize = 1024;

/// One command of a spawn request (MPI_Comm_spawn has one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnCommand {
    /// The program, as given (a name searched in `PATH`, or a path).
    pub command: String,
    /// Its arguments, without the program name (MPI_ARGV_NULL: none).
    pub arguments: Vec<String>,
    /// Processes asked for (maxprocs).
    pub process_count: u32,
    /// Info key `wdir`: the working directory of the new processes.
    pub working_directory: Option<String>,
    /// Info key `host`: where to start them.
    pub host: Option<String>,
}

/// Where the new processes would go: what the root knows of its job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnRoom {
    /// MPI_UNIVERSE_SIZE (in ranks).
    pub universe_size: u32,
    /// Processes of the job already running (the world's size: no process
    /// has been spawned, so nothing else counts against the universe).
    pub running_count: u32,
    /// Names a `host` info value may take for this job's host.
    pub host_names: Vec<String>,
    /// The process was started by resmpi's `mpiexec` (`RESMPI_JOB_ID`).
    pub under_resmpi_mpiexec: bool,
    /// `PATH`, to find a command without a slash.
    pub search_path: Option<String>,
}

/// What the root asks of the file system.
pub trait FileSystem {
    /// `path` is a regular file this process may execute.
    fn is_executable(&self, path: &Path) -> bool;
    /// `path` is a directory.
    fn is_directory(&self, path: &Path) -> bool;
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFileSystem;

impl FileSystem for RealFileSystem {
    fn is_executable(&self, path: &Path) -> bool {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .map(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    }

    fn is_directory(&self, path: &Path) -> bool {
        path.is_dir()
    }
}

fn spawn_error(message: String) -> MpiError {
    MpiError::new(ErrorClass::Spawn, message)
}

/// Where `command` would be run from, as execvp would find it (a name with
/// a slash is taken relative to `working_directory`, the children's
/// directory); `None` when it cannot be found or run.
pub fn resolve_command(
    command: &str,
    working_directory: Option<&str>,
    search_path: Option<&str>,
    files: &impl FileSystem,
) -> Option<PathBuf> {
    if command.is_empty() {
        return None;
    }
    if command.contains('/') {
        let path = match working_directory {
            Some(directory) if !command.starts_with('/') => Path::new(directory).join(command),
            _ => PathBuf::from(command),
        };
        return files.is_executable(&path).then_some(path);
    }
    search_path?
        .split(':')
        .map(|directory| if directory.is_empty() { "." } else { directory })
        .map(|directory| Path::new(directory).join(command))
        .find(|candidate| files.is_executable(candidate))
}

/// The processes a request asks for in all (saturating: an absurd total
/// is still over any universe).
pub fn total_process_count(commands: &[SpawnCommand]) -> u32 {
    commands.iter().fold(0u32, |total, command| {
        total.saturating_add(command.process_count)
    })
}

/// The root's verdict on `commands`. Always an error today (MPI_ERR_SPAWN
/// for every reason below): the checks come first so that the message
/// names what the user can fix.
pub fn judge(
    commands: &[SpawnCommand],
    room: &SpawnRoom,
    files: &impl FileSystem,
) -> MpiResult<()> {
    for (index, command) in commands.iter().enumerate() {
        let which = if commands.len() > 1 {
            format!("command {index} ('{}')", command.command)
        } else {
            format!("command '{}'", command.command)
        };
        if let Some(directory) = &command.working_directory {
            if !files.is_directory(Path::new(directory)) {
                return Err(spawn_error(format!(
                    "{which}: info wdir '{directory}' is not a directory"
                )));
            }
        }
        if resolve_command(
            &command.command,
            command.working_directory.as_deref(),
            room.search_path.as_deref(),
            files,
        )
        .is_none()
        {
            return Err(spawn_error(format!(
                "{which}: not found or not executable (searched {})",
                if command.command.contains('/') {
                    "relative to the working directory".to_string()
                } else {
                    "PATH".to_string()
                }
            )));
        }
        if let Some(host) = &command.host {
            if !room.host_names.iter().any(|name| name == host) {
                return Err(spawn_error(format!(
                    "{which}: info host '{host}' is not a host of this job (it runs on {})",
                    room.host_names.first().map_or("this host", String::as_str)
                )));
            }
        }
    }
    let asked_count = total_process_count(commands);
    if !room.under_resmpi_mpiexec {
        return Err(spawn_error(format!(
            "starting {asked_count} processes needs resmpi's own mpiexec: under hydra, Slurm or a singleton (no RESMPI_JOB_ID) resmpi cannot take part in the launcher's spawn"
        )));
    }
    let room_count = room.universe_size.saturating_sub(room.running_count);
    if asked_count > room_count {
        return Err(spawn_error(format!(
            "{asked_count} new processes asked for, but MPI_UNIVERSE_SIZE is {} and {} processes run: room for {room_count} (raise mpiexec --universe-size or the hosts' slots)",
            room.universe_size, room.running_count
        )));
    }
    Err(spawn_error(format!(
        "the request is valid, but resmpi's mpiexec cannot start processes yet: {asked_count} processes not started (MPI_Comm_accept/MPI_Comm_connect work between processes of one job)"
    )))
}

/// `message` cut to at most `VERDICT_MESSAGE_MAX_BYTES` at a character
/// boundary, for the root's broadcast.
pub fn verdict_message_bytes(message: &str) -> &[u8] {
    let mut end = message.len().min(VERDICT_MESSAGE_MAX_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message.as_bytes()[..end]
}

impl crate::Mpi {
    /// What the root knows of the room for new processes.
    pub fn spawn_room(&self) -> MpiResult<SpawnRoom> {
        let name = self.processor_name.clone();
        let mut host_names = vec![name.clone(), "localhost".to_string()];
        if let Some((short, _)) = name.split_once('.') {
            host_names.push(short.to_string());
        }
        Ok(SpawnRoom {
            universe_size: self.universe_size(),
            running_count: self.comm(crate::WORLD)?.size(),
            host_names,
            under_resmpi_mpiexec: self.config.job_id.is_some(),
            search_path: std::env::var("PATH").ok(),
        })
    }

    /// MPI_Comm_spawn(_multiple) on intra-communicator `comm_index`:
    /// `at_root` is the root's request (`None` elsewhere; an error when
    /// its arguments were invalid). The root judges it and broadcasts
    /// `[ok, processes asked for, message length]` and the message, so
    /// every member returns the same outcome. Returns the processes asked
    /// for with the error (the caller fills that many error codes), or the
    /// error alone when the arguments themselves were bad.
    pub fn comm_spawn(
        &mut self,
        comm_index: usize,
        root: i32,
        at_root: Option<MpiResult<Vec<SpawnCommand>>>,
    ) -> Result<(), (MpiError, usize)> {
        let comm = self.comm(comm_index).map_err(|error| (error, 0))?;
        if comm.is_inter() {
            return Err((
                MpiError::new(
                    ErrorClass::Comm,
                    "MPI_Comm_spawn needs an intra-communicator",
                ),
                0,
            ));
        }
        if root < 0 || root as u32 >= comm.size() {
            return Err((
                MpiError::new(
                    ErrorClass::Root,
                    format!("root {root} is out of range (size {})", comm.size()),
                ),
                0,
            ));
        }
        // [arguments valid at the root, processes asked for, message bytes]
        let mut words = [0u32; 3];
        let mut verdict = Vec::new();
        let mut root_error = None;
        match at_root {
            Some(Ok(commands)) => {
                let outcome = self
                    .spawn_room()
                    .and_then(|room| judge(&commands, &room, &RealFileSystem));
                let message = match outcome {
                    Ok(()) => String::new(),
                    Err(error) => error.message.clone(),
                };
                verdict = verdict_message_bytes(&message).to_vec();
                words = [1, total_process_count(&commands), verdict.len() as u32];
            }
            Some(Err(error)) => root_error = Some(error),
            None => {}
        }
        let mut header: Vec<u8> = words.iter().flat_map(|word| word.to_ne_bytes()).collect();
        self.bcast(comm_index, &mut header, root as u32)
            .map_err(|error| (error, 0))?;
        let word =
            |at: usize| u32::from_ne_bytes(header[at * 4..at * 4 + 4].try_into().expect("4 bytes"));
        if word(0) == 0 {
            let error = root_error.unwrap_or_else(|| {
                MpiError::new(ErrorClass::Arg, "the root's spawn arguments are invalid")
            });
            return Err((error, 0));
        }
        let count = word(1) as usize;
        verdict.resize(word(2) as usize, 0);
        self.bcast(comm_index, &mut verdict, root as u32)
            .map_err(|error| (error, count))?;
        Err((
            spawn_error(String::from_utf8_lossy(&verdict).into_owned()),
            count,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file system of a few executables and directories.
    struct FakeFiles {
        executables: Vec<&'static str>,
        directories: Vec<&'static str>,
    }

    impl FileSystem for FakeFiles {
        fn is_executable(&self, path: &Path) -> bool {
            self.executables.iter().any(|file| Path::new(file) == path)
        }
        fn is_directory(&self, path: &Path) -> bool {
            self.directories.iter().any(|file| Path::new(file) == path)
        }
    }

    fn files() -> FakeFiles {
        FakeFiles {
            executables: vec!["/usr/bin/worker", "/job/bin/child", "./local"],
            directories: vec!["/job", "/tmp"],
        }
    }

    fn room() -> SpawnRoom {
        SpawnRoom {
            universe_size: 8,
            running_count: 3,
            host_names: vec!["node1".into(), "localhost".into()],
            under_resmpi_mpiexec: true,
            search_path: Some("/bin:/usr/bin".into()),
        }
    }

    fn command(name: &str, process_count: u32) -> SpawnCommand {
        SpawnCommand {
            command: name.into(),
            arguments: vec![],
            process_count,
            working_directory: None,
            host: None,
        }
    }

    fn message_of(result: MpiResult<()>) -> String {
        let error = result.expect_err("every spawn is refused today");
        assert_eq!(error.class, ErrorClass::Spawn);
        error.message.clone()
    }

    #[test]
    fn commands_are_found_as_execvp_finds_them() {
        let files = files();
        let path = Some("/bin:/usr/bin");
        assert_eq!(
            resolve_command("worker", None, path, &files),
            Some(PathBuf::from("/usr/bin/worker"))
        );
        assert_eq!(resolve_command("worker", None, None, &files), None);
        assert_eq!(
            resolve_command("bin/child", Some("/job"), path, &files),
            Some(PathBuf::from("/job/bin/child"))
        );
        assert_eq!(resolve_command("bin/child", None, path, &files), None);
        assert_eq!(resolve_command("", None, path, &files), None);
        assert_eq!(resolve_command("child", None, path, &files), None);
    }

    #[test]
    fn a_valid_request_reaches_the_launcher_verdict() {
        let mut request = command("worker", 5);
        request.working_directory = Some("/tmp".into());
        request.host = Some("node1".into());
        let message = message_of(judge(&[request.clone()], &room(), &files()));
        assert!(message.contains("cannot start processes yet"), "{message}");
        let other_launcher = SpawnRoom {
            under_resmpi_mpiexec: false,
            ..room()
        };
        let message = message_of(judge(&[request], &other_launcher, &files()));
        assert!(message.contains("needs resmpi's own mpiexec"), "{message}");
    }

    #[test]
    fn more_processes_than_the_universe_leaves_room_for_are_refused() {
        let message = message_of(judge(&[command("worker", 6)], &room(), &files()));
        assert!(message.contains("room for 5"), "{message}");
        let two = [command("worker", 3), command("worker", 3)];
        let message = message_of(judge(&two, &room(), &files()));
        assert!(message.contains("6 new processes"), "{message}");
        let absurd = [command("worker", u32::MAX), command("worker", u32::MAX)];
        assert_eq!(total_process_count(&absurd), u32::MAX);
    }

    #[test]
    fn a_bad_command_directory_or_host_is_named() {
        let message = message_of(judge(&[command("nothing", 1)], &room(), &files()));
        assert!(message.contains("'nothing': not found"), "{message}");
        let mut request = command("worker", 1);
        request.working_directory = Some("/no/such".into());
        let message = message_of(judge(&[request], &room(), &files()));
        assert!(message.contains("wdir '/no/such'"), "{message}");
        let mut request = command("worker", 1);
        request.host = Some("elsewhere".into());
        let message = message_of(judge(&[command("worker", 1), request], &room(), &files()));
        assert!(
            message.contains("command 1 ('worker'): info host 'elsewhere'"),
            "{message}"
        );
    }

    #[test]
    fn verdict_messages_are_cut_at_a_character_boundary() {
        let long = "é".repeat(VERDICT_MESSAGE_MAX_BYTES);
        let cut = verdict_message_bytes(&long);
        assert!(cut.len() <= VERDICT_MESSAGE_MAX_BYTES);
        assert!(std::str::from_utf8(cut).is_ok());
        assert_eq!(verdict_message_bytes("short"), b"short");
    }
}
