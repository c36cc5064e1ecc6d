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
    Ok(())
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

/// What a spawned child learns of its parents (`RESMPI_SPAWN_PARENT`,
/// handed to the nested mpiexec by the parents' one, opaque to both).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnParent {
    /// Context of the parent/child inter-communicator, agreed by the
    /// parents (the largest next free context among them).
    pub context: u32,
    /// Where the parents' root waits for the children's addresses.
    pub rendezvous: String,
    /// A one-time token the children's root sends back first (hex).
    pub token: String,
    /// The parents' job secret (hex), which they prove when they connect.
    pub secret: String,
    /// Endpoints of the spawning communicator, in its rank order.
    pub parents: Vec<u32>,
}

impl SpawnParent {
    /// The environment value.
    pub fn format(&self) -> String {
        let parents: Vec<String> = self.parents.iter().map(u32::to_string).collect();
        format!(
            "{};{};{};{};{}",
            self.context,
            self.rendezvous,
            self.token,
            self.secret,
            parents.join(",")
        )
    }

    /// Parse the environment value; `None` if malformed.
    pub fn parse(text: &str) -> Option<SpawnParent> {
        let mut fields = text.split(';');
        let parent = SpawnParent {
            context: fields.next()?.parse().ok()?,
            rendezvous: fields.next()?.to_string(),
            token: fields.next()?.to_string(),
            secret: fields.next()?.to_string(),
            parents: fields
                .next()?
                .split(',')
                .map(|word| word.parse().ok())
                .collect::<Option<Vec<u32>>>()?,
        };
        (fields.next().is_none() && !parent.parents.is_empty()).then_some(parent)
    }
}

/// `word` quoted for a POSIX shell.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The shell script the nested mpiexec runs in every child: each process
/// picks its command by `PMI_RANK` (spawn_multiple's commands take
/// consecutive ranks), changes to its directory and execs the command.
pub fn child_script(commands: &[SpawnCommand], default_directory: &str) -> String {
    let mut script = String::from("case \"$PMI_RANK\" in\n");
    let mut first = 0u32;
    for command in commands {
        let ranks: Vec<String> = (first..first + command.process_count)
            .map(|rank| rank.to_string())
            .collect();
        first += command.process_count;
        let directory = command
            .working_directory
            .as_deref()
            .unwrap_or(default_directory);
        let mut words = vec![shell_quote(&command.command)];
        words.extend(command.arguments.iter().map(|word| shell_quote(word)));
        script.push_str(&format!(
            "{}) cd {} && exec {} ;;\n",
            ranks.join("|"),
            shell_quote(directory),
            words.join(" ")
        ));
    }
    script.push_str("esac\nexit 127\n");
    script
}

/// How long the parents' root waits for the children to report (they are
/// in MPI_Init: this bounds only children that die or never call it).
fn spawn_timeout() -> std::time::Duration {
    let seconds = std::env::var("RESMPI_SPAWN_TIMEOUT")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .unwrap_or(60);
    std::time::Duration::from_secs(seconds)
}

/// The parents' root: wait on `listener` for the children's root, which
/// writes `TOKEN ADDRESS...` and a newline; returns the addresses.
fn await_children(
    listener: &std::net::TcpListener,
    token: &str,
    count: usize,
) -> Result<Vec<String>, String> {
    use std::io::{BufRead, BufReader};
    let deadline = std::time::Instant::now() + spawn_timeout();
    listener
        .set_nonblocking(true)
        .map_err(|error| error.to_string())?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream
                    .set_nonblocking(false)
                    .and_then(|()| {
                        stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                    })
                    .map_err(|error| error.to_string())?;
                let mut line = String::new();
                let mut reader = BufReader::new(std::io::Read::take(stream, 1 << 20));
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut words = line.split_whitespace();
                if words.next() != Some(token) {
                    continue;
                }
                let addresses: Vec<String> = words.map(str::to_string).collect();
                if addresses.len() != count {
                    return Err(format!(
                        "the children reported {} addresses for {count} processes",
                        addresses.len()
                    ));
                }
                return Ok(addresses);
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() >= deadline {
                    return Err(format!(
                        "the children did not reach MPI_Init within {} s (RESMPI_SPAWN_TIMEOUT); did they fail to start?",
                        spawn_timeout().as_secs()
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(error) => return Err(error.to_string()),
        }
    }
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

    /// The root's part of a spawn the verdict allowed: ask mpiexec to
    /// start the children and wait for their addresses. Returns the
    /// children's first endpoint and addresses.
    fn start_children(
        &mut self,
        commands: &[SpawnCommand],
        context: u32,
        parents: &[u32],
    ) -> MpiResult<(u32, Vec<String>)> {
        let failed = |message: String| spawn_error(message);
        if self.replicas.count > 1 || cfg!(feature = "msglog") || cfg!(feature = "replication") {
            return Err(failed(
                "spawn is not supported under --replicas or message logging".into(),
            ));
        }
        let Some(secret) = self.config.job_secret.clone() else {
            return Err(failed("this job has no secret (RESMPI_JOB_SECRET)".into()));
        };
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .map_err(|error| failed(format!("listening for the children: {error}")))?;
        let rendezvous = listener
            .local_addr()
            .map_err(|error| failed(error.to_string()))?
            .to_string();
        let token = resmpi_runtime::hex_encode(&resmpi_runtime::random_bytes(16));
        let parent = SpawnParent {
            context,
            rendezvous,
            token: token.clone(),
            secret: resmpi_runtime::hex_encode(&secret),
            parents: parents.to_vec(),
        };
        let directory = std::env::current_dir()
            .map(|directory| directory.to_string_lossy().into_owned())
            .unwrap_or_else(|_| ".".into());
        let count = total_process_count(commands);
        let base = self
            .pmi
            .spawn(count, &child_script(commands, &directory), &parent.format())
            .map_err(|error| failed(format!("mpiexec refused: {}", error.message())))?;
        let addresses = await_children(&listener, &token, count as usize).map_err(failed)?;
        Ok((base, addresses))
    }

    /// MPI_Comm_spawn(_multiple) on intra-communicator `comm_index`:
    /// `at_root` is the root's request (`None` elsewhere; an error when
    /// its arguments were invalid). The parents agree on the new
    /// inter-communicator's context, the root judges the request and
    /// starts the children, and broadcasts `[arguments valid, processes,
    /// message length, started, first endpoint]` and the message (the
    /// error, or the children's addresses), so every member returns the
    /// same outcome; on success each connects to every child. Returns the
    /// inter-communicator, or the error with the processes asked for (the
    /// caller fills that many error codes).
    pub fn comm_spawn(
        &mut self,
        comm_index: usize,
        root: i32,
        at_root: Option<MpiResult<Vec<SpawnCommand>>>,
    ) -> Result<usize, (MpiError, usize)> {
        let local = self.comm(comm_index).map_err(|error| (error, 0))?.clone();
        if local.is_inter() {
            return Err((
                MpiError::new(
                    ErrorClass::Comm,
                    "MPI_Comm_spawn needs an intra-communicator",
                ),
                0,
            ));
        }
        if root < 0 || root as u32 >= local.size() {
            return Err((
                MpiError::new(
                    ErrorClass::Root,
                    format!("root {root} is out of range (size {})", local.size()),
                ),
                0,
            ));
        }
        let context = self
            .allreduce_i64_max(comm_index, self.next_context as i64)
            .map_err(|error| (error, 0))? as u32;
        let mut words = [0u32; 5];
        let mut verdict = Vec::new();
        let mut root_error = None;
        match at_root {
            Some(Ok(commands)) => {
                let outcome = self
                    .spawn_room()
                    .and_then(|room| judge(&commands, &room, &RealFileSystem))
                    .and_then(|()| self.start_children(&commands, context, &local.group));
                let (started, base, message) = match outcome {
                    Ok((base, addresses)) => (1, base, addresses.join(" ")),
                    Err(error) => (0, 0, error.message.clone()),
                };
                verdict = if started == 1 {
                    message.into_bytes()
                } else {
                    verdict_message_bytes(&message).to_vec()
                };
                words = [
                    1,
                    total_process_count(&commands),
                    verdict.len() as u32,
                    started,
                    base,
                ];
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
        let text = String::from_utf8_lossy(&verdict).into_owned();
        if word(3) == 0 {
            return Err((spawn_error(text), count));
        }
        let base = word(4);
        self.connect_children(&local, context, base, &text)
            .map_err(|error| (error, count))
    }

    /// Every parent's end of a started spawn: grow the endpoint space,
    /// connect to each child, and make the inter-communicator.
    fn connect_children(
        &mut self,
        local: &crate::comm::Communicator,
        context: u32,
        base: u32,
        addresses: &str,
    ) -> MpiResult<usize> {
        let addresses: Vec<&str> = addresses.split_whitespace().collect();
        let count = addresses.len() as u32;
        let secret = self.config.job_secret.clone().unwrap_or_default();
        let reliable = self.config.reliable;
        self.engine.add_endpoints(base + count, reliable);
        let own = self.engine.state.rank;
        for (child, address) in addresses.iter().enumerate() {
            crate::wireup::connect_spawned_peer(
                &mut self.engine.transports,
                &self.config,
                own,
                base + child as u32,
                address,
                &secret,
            )?;
        }
        self.next_context = self
            .next_context
            .max(context + crate::intercomm::INTERCOMM_CONTEXT_SPAN);
        let children: Vec<u32> = (base..base + count).collect();
        // Another world ends on its own: its launcher reports a death
        // (and ends this job), a closed connection alone is none.
        self.let_other_world_leave(&children);
        Ok(self.add_intercomm(context, local, std::sync::Arc::new(children)))
    }
}

/// A spawned child's parents (`RESMPI_SPAWN_PARENT`) and its first
/// endpoint (`RESMPI_SPAWN_BASE`), both set by the parents' mpiexec;
/// `None` in a process nobody spawned.
pub fn child_parent() -> MpiResult<Option<(u32, SpawnParent)>> {
    let Ok(text) = std::env::var("RESMPI_SPAWN_PARENT") else {
        return Ok(None);
    };
    let base = std::env::var("RESMPI_SPAWN_BASE")
        .ok()
        .and_then(|text| text.parse::<u32>().ok());
    match (base, SpawnParent::parse(&text)) {
        (Some(base), Some(parent)) => Ok(Some((base, parent))),
        _ => Err(MpiError::new(
            ErrorClass::Other,
            "MPI_Init: RESMPI_SPAWN_PARENT or RESMPI_SPAWN_BASE is malformed",
        )),
    }
}

/// A spawned child's wire-up (`wireup::wire_up_child`), its first
/// process reporting the children's addresses to the parents' root.
pub fn wire_up_child(
    pmi: &mut resmpi_runtime::Pmi,
    config: &resmpi_runtime::Config,
    base: u32,
    parent: &SpawnParent,
) -> MpiResult<crate::transport::Transports> {
    let parent_secret = resmpi_runtime::hex_decode(&parent.secret).ok_or_else(|| {
        MpiError::new(
            ErrorClass::Other,
            "MPI_Init: the parents' secret is not hex",
        )
    })?;
    let report = |addresses: &[String]| {
        use std::io::Write;
        let failed = |error: std::io::Error| {
            MpiError::new(
                ErrorClass::Other,
                format!(
                    "MPI_Init: telling the parents at {} where the children listen: {error}",
                    parent.rendezvous
                ),
            )
        };
        let mut stream = std::net::TcpStream::connect(&parent.rendezvous).map_err(failed)?;
        writeln!(stream, "{} {}", parent.token, addresses.join(" ")).map_err(failed)
    };
    crate::wireup::wire_up_child(pmi, config, base, &parent.parents, &parent_secret, report)
}

impl crate::Mpi {
    /// A spawned child's MPI_Init, after MPI_COMM_WORLD exists: the
    /// inter-communicator to the parents, on the context they agreed.
    pub(crate) fn adopt_parent(&mut self, parent: &SpawnParent) {
        let Ok(world) = self.comm(crate::WORLD).cloned() else {
            return;
        };
        self.next_context = self
            .next_context
            .max(parent.context + crate::intercomm::INTERCOMM_CONTEXT_SPAN);
        // The parents may end first (see `connect_children`).
        self.let_other_world_leave(&parent.parents);
        let parents = std::sync::Arc::new(parent.parents.clone());
        self.parent = Some(self.add_intercomm(parent.context, &world, parents));
    }

    /// MPI_Comm_disconnect of an inter-communicator to another world
    /// (MPI_Comm_spawn's parents or children): those processes may now
    /// close their connections without that being a failure. Returns
    /// whether `remote` held such processes.
    pub(crate) fn let_other_world_leave(&mut self, remote: &[u32]) -> bool {
        let Ok(world) = self.comm(crate::WORLD) else {
            return false;
        };
        let others: Vec<u32> = remote
            .iter()
            .copied()
            .filter(|endpoint| !world.group.contains(endpoint))
            .collect();
        let any = !others.is_empty();
        for endpoint in others {
            if !self.engine.state.leavers.contains(&endpoint) {
                self.engine.state.leavers.push(endpoint);
            }
            self.engine.links.let_peer_leave(endpoint);
        }
        any
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
    fn a_valid_request_passes_under_resmpis_mpiexec_only() {
        let mut request = command("worker", 5);
        request.working_directory = Some("/tmp".into());
        request.host = Some("node1".into());
        assert_eq!(judge(&[request.clone()], &room(), &files()), Ok(()));
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
