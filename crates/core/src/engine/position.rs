//! Message logging: a checkpoint's position (issue 13 item 5), what the
//! library saves beside the application's regions so that a restarted
//! rank resumes from its checkpoint instead of replaying from `MPI_Init`.
//!
//! A position says, per peer, the last logical number delivered (every
//! message numbered at or below it was taken by the application; nothing
//! above it was) and the last number sent; the ordinals of the protocol's
//! next determinants; and each communicator's collective counters. It
//! exists only where it is exact: a checkpoint taken with a request still
//! pending, a message taken by `MPI_Mprobe` and not received, or a message
//! delivered while an earlier one of the same sender waits unexpected
//! (delivered out of order across tags) has none ([`Engine::checkpoint_position`]
//! says why), and the replacement then replays from `MPI_Init`.
//!
//! The wire form (inside the checkpoint file, so covered by its CRC) is
//! versioned and parsed with checks: version u8, job id (length u16 and
//! bytes), size u32, size × (delivered u64, sent u64), three ordinals u64,
//! count u32, count × (context u32, collective u32, shared-memory u64),
//! log length u64 and the protocol's sender log, standard output bytes
//! u64.
//!
//! The sender log travels in the checkpoint (bounded by the peers'
//! trimming: only what their checkpoints do not cover): a message sent
//! before the checkpoint may not have reached its destination when the
//! process died (a frame lost with it), and the replacement, which does
//! not run that part of the program again, sends it again from the
//! carried log; the peer drops what it had as a duplicate.

use resmpi_ft::Interceptor;

use super::Engine;

/// Version of the encoded position (2: a third ordinal, the length of the
/// protocol's determinant list, which the event logger trims to).
const POSITION_VERSION: u8 = 2;

/// Most communicators a position records (a bound on what is parsed).
const COMMUNICATORS_MAX: usize = 1 << 16;

/// Most ranks a position records.
const RANKS_MAX: usize = 1 << 24;

/// One communicator's collective counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectivePosition {
    /// Its context id.
    pub context: u32,
    /// `Communicator::collective_sequence`.
    pub collective_sequence: u32,
    /// `Communicator::shared_memory_sequence`.
    pub shared_memory_sequence: u64,
}

/// Where a process stood when it took a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointPosition {
    /// The job the position belongs to (`RESMPI_JOB_ID`): numbers of
    /// another job mean nothing here.
    pub job: String,
    /// Per world rank: every message from it numbered at or below this
    /// was delivered, none above.
    pub delivered: Vec<u64>,
    /// Per world rank: the last logical number sent to it.
    pub sent: Vec<u64>,
    /// The protocol's ordinals ([`Interceptor::checkpoint_ordinals`]):
    /// next wildcard receive, next counted completion call or probe, and
    /// the length of its determinant list.
    pub ordinals: [u64; 3],
    /// Every communicator's collective counters.
    pub collectives: Vec<CollectivePosition>,
    /// The protocol's sender log ([`Interceptor::checkpoint_log`]).
    pub log: Vec<u8>,
    /// Bytes of standard output the process had passed on (the C layer
    /// fills it in; `u64::MAX`: unknown).
    pub output_bytes: u64,
}

impl CheckpointPosition {
    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![POSITION_VERSION];
        let job = self.job.as_bytes();
        let job = &job[..job.len().min(u16::MAX as usize)];
        bytes.extend_from_slice(&(job.len() as u16).to_le_bytes());
        bytes.extend_from_slice(job);
        bytes.extend_from_slice(&(self.delivered.len() as u32).to_le_bytes());
        for (delivered, sent) in self.delivered.iter().zip(&self.sent) {
            bytes.extend_from_slice(&delivered.to_le_bytes());
            bytes.extend_from_slice(&sent.to_le_bytes());
        }
        for ordinal in self.ordinals {
            bytes.extend_from_slice(&ordinal.to_le_bytes());
        }
        bytes.extend_from_slice(&(self.collectives.len() as u32).to_le_bytes());
        for collective in &self.collectives {
            bytes.extend_from_slice(&collective.context.to_le_bytes());
            bytes.extend_from_slice(&collective.collective_sequence.to_le_bytes());
            bytes.extend_from_slice(&collective.shared_memory_sequence.to_le_bytes());
        }
        bytes.extend_from_slice(&(self.log.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&self.log);
        bytes.extend_from_slice(&self.output_bytes.to_le_bytes());
        bytes
    }

    /// Parse `bytes`; an error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<CheckpointPosition, String> {
        let mut reader = Reader::new(bytes, "checkpoint position: truncated".to_string());
        let version = reader.take(1)?[0];
        if version != POSITION_VERSION {
            return Err(format!(
                "checkpoint position version {version}, expected {POSITION_VERSION}"
            ));
        }
        let job_length = u16::from_le_bytes(reader.array()?) as usize;
        let job = String::from_utf8(reader.take(job_length)?.to_vec())
            .map_err(|_| "checkpoint position: job id is not UTF-8".to_string())?;
        let size = u32::from_le_bytes(reader.array()?) as usize;
        if size > RANKS_MAX {
            return Err(format!("checkpoint position: {size} ranks"));
        }
        let mut delivered = Vec::with_capacity(size.min(bytes.len() / 16));
        let mut sent = Vec::with_capacity(size.min(bytes.len() / 16));
        for _ in 0..size {
            delivered.push(u64::from_le_bytes(reader.array()?));
            sent.push(u64::from_le_bytes(reader.array()?));
        }
        let ordinals = [
            u64::from_le_bytes(reader.array()?),
            u64::from_le_bytes(reader.array()?),
            u64::from_le_bytes(reader.array()?),
        ];
        let count = u32::from_le_bytes(reader.array()?) as usize;
        if count > COMMUNICATORS_MAX {
            return Err(format!("checkpoint position: {count} communicators"));
        }
        let mut collectives = Vec::with_capacity(count.min(bytes.len() / 16));
        for _ in 0..count {
            collectives.push(CollectivePosition {
                context: u32::from_le_bytes(reader.array()?),
                collective_sequence: u32::from_le_bytes(reader.array()?),
                shared_memory_sequence: u64::from_le_bytes(reader.array()?),
            });
        }
        let log_length = usize::try_from(u64::from_le_bytes(reader.array()?))
            .map_err(|_| "checkpoint position: log too long".to_string())?;
        let log = reader.take(log_length)?.to_vec();
        let output_bytes = u64::from_le_bytes(reader.array()?);
        if reader.remaining() != 0 {
            return Err(format!(
                "checkpoint position: {} bytes left over",
                reader.remaining()
            ));
        }
        Ok(CheckpointPosition {
            job,
            delivered,
            sent,
            ordinals,
            collectives,
            log,
            output_bytes,
        })
    }
}

/// A cursor over a saved position.
type Reader<'a> = resmpi_wire::bytes::ByteReader<'a, String>;

/// Whether `engine` runs a message-logging protocol.
pub fn logs_messages<F: Interceptor>(_engine: &Engine<F>) -> bool {
    F::LOGS_MESSAGES
}

impl<F: Interceptor> Engine<F> {
    /// Give the protocol the gate of the process's standard output
    /// (`Interceptor::set_output_gate`: optimistic logging's output commit).
    pub fn set_output_gate(&mut self, gate: fn(bool)) {
        if F::LOGS_MESSAGES {
            self.state.interceptor.set_output_gate(gate);
        }
    }
}

impl<F: Interceptor> super::State<F> {
    /// A replacement that resumes from a checkpoint's position skips the
    /// original's run up to it: a message it sends or receives before the
    /// program's restart (`VELOC_Restart`) would be numbered or matched
    /// as if after it. Refused with an error that says so, rather than a
    /// hang or a message taken by the wrong receive.
    pub(super) fn refuse_before_restart(&self) -> crate::error::MpiResult<()> {
        if !self.resume_pending {
            return Ok(());
        }
        Err(crate::error::MpiError::new(
            crate::error::ErrorClass::Other,
            "message logging: this restarted rank resumes from its checkpoint's position, but \
             the program communicates before VELOC_Restart, whose position the peers already \
             passed; a resumed program must call VELOC_Restart first \
             (RESMPI_MSGLOG_RESUME=off replays from MPI_Init instead)",
        ))
    }
}

impl<F: Interceptor> Engine<F> {
    /// This process's position now, for a checkpoint of job `job`; Err
    /// says why a replacement could not resume from it (it then replays
    /// from `MPI_Init`). Only meaningful under message logging.
    pub fn checkpoint_position(&mut self, job: &str) -> Result<CheckpointPosition, String> {
        if !F::LOGS_MESSAGES {
            return Err("this library does not log messages".to_string());
        }
        let state = &mut self.state;
        let pending = state
            .requests
            .live_indices()
            .into_iter()
            .filter(|&index| state.requests.get(index).is_some_and(|r| !r.complete))
            .count();
        if pending > 0 {
            return Err(format!(
                "{pending} request(s) pending: the program after VELOC_Restart cannot own them"
            ));
        }
        if !state.sends_waiting_for_log.is_empty() || !state.rendezvous_in.is_empty() {
            return Err("messages in transfer".to_string());
        }
        if state.probed_messages.iter().any(Option::is_some) {
            return Err("a message taken by MPI_Mprobe is not received yet".to_string());
        }
        let size = state.size as usize;
        // Per source: the lowest number waiting unexpected, and how many wait.
        let mut lowest_waiting = vec![u64::MAX; size];
        let mut waiting = vec![0u64; size];
        for (envelope, message) in state.matcher.unexpected_mut() {
            let source = envelope.source as usize;
            if source < size {
                lowest_waiting[source] = lowest_waiting[source].min(message.logical_seq());
                waiting[source] += 1;
            }
        }
        let mut delivered = Vec::with_capacity(size);
        for source in 0..size {
            let taken = state.message_seq_in[source];
            if waiting[source] == 0 {
                delivered.push(taken);
                continue;
            }
            let prefix = lowest_waiting[source] - 1;
            if taken - prefix != waiting[source] {
                return Err(format!(
                    "a message from rank {source} was delivered while an earlier one waits unexpected"
                ));
            }
            delivered.push(prefix);
        }
        let collectives = state
            .comms
            .iter()
            .flatten()
            .map(|communicator| CollectivePosition {
                context: communicator.context,
                collective_sequence: communicator.collective_sequence,
                shared_memory_sequence: communicator.shared_memory_sequence,
            })
            .collect();
        let log = state.interceptor.checkpoint_log()?;
        Ok(CheckpointPosition {
            job: job.to_string(),
            delivered,
            sent: state.message_seq_out.clone(),
            ordinals: state.interceptor.checkpoint_ordinals(),
            collectives,
            log,
            output_bytes: u64::MAX,
        })
    }

    /// [`checkpoint_position`](Self::checkpoint_position), asked again
    /// while the protocol says a position may come with a little progress
    /// (`Interceptor::checkpoint_may_wait`), for at most `wait`.
    pub fn checkpoint_position_waiting(
        &mut self,
        job: &str,
        wait: std::time::Duration,
    ) -> Result<CheckpointPosition, String> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            let refusal = match self.checkpoint_position(job) {
                Ok(position) => return Ok(position),
                Err(refusal) => refusal,
            };
            if !F::LOGS_MESSAGES
                || std::time::Instant::now() >= deadline
                || !self.state.interceptor.checkpoint_may_wait()
            {
                return Err(refusal);
            }
            if !self.progress().map_err(|error| error.to_string())? {
                std::thread::yield_now();
            }
        }
    }

    /// A checkpoint at `position` is durable: the protocol tells each peer
    /// how far it reaches, so the peers trim their logs.
    pub fn announce_checkpoint(&mut self, position: &CheckpointPosition) {
        if F::LOGS_MESSAGES {
            self.state
                .interceptor
                .on_checkpoint(&position.delivered, position.ordinals);
        }
    }

    /// This process, a replacement, resumes from `position` (call before
    /// anything arrives from the peers: at start-up). Per peer, messages
    /// numbered at or below the delivered position are taken already
    /// (the peers' re-sends of them are dropped as duplicates) and the
    /// next message sent is numbered after the sent position; the
    /// protocol's ordinals continue from the checkpoint's, its sender log
    /// is the carried one, and what that holds is sent again. Err: the
    /// position is for another job size, or its log does not parse.
    pub fn resume_from(&mut self, position: &CheckpointPosition) -> Result<(), String> {
        let size = self.state.size as usize;
        if !F::LOGS_MESSAGES || position.delivered.len() != size || position.sent.len() != size {
            return Err(format!(
                "the checkpoint's position is for {} ranks, the job has {size}",
                position.delivered.len()
            ));
        }
        for peer in 0..size {
            let taken = &mut self.state.message_seq_in[peer];
            *taken = (*taken).max(position.delivered[peer]);
            let sent = &mut self.state.message_seq_out[peer];
            *sent = (*sent).max(position.sent[peer]);
        }
        let rank = self.state.rank as usize;
        // Already taken, or sent, by an earlier incarnation: anything of
        // the replay below the position that is here is dropped.
        let delivered = position.delivered.clone();
        while self
            .state
            .matcher
            .withdraw_unexpected(|envelope, message| {
                let source = envelope.source as usize;
                source != rank && source < size && message.logical_seq() <= delivered[source]
            })
            .is_some()
        {
            self.state.duplicate_messages_dropped += 1;
        }
        self.state
            .interceptor
            .resume_at(position.ordinals, &position.log)?;
        self.state.resume_pending = true;
        // What the earlier incarnation sent may not all have arrived (a
        // frame lost with it): send again what the carried log holds; the
        // peers drop what they took already.
        for peer in 0..self.state.size {
            if peer != self.state.rank && !self.state.is_restarting(peer) {
                self.replay_to(peer);
            }
        }
        Ok(())
    }

    /// Set every communicator the position names (by context id) to its
    /// collective counters (at `VELOC_Restart`, once the program has made
    /// its communicators again). Returns how many were set.
    pub fn resume_collectives(&mut self, position: &CheckpointPosition) -> usize {
        self.state.resume_pending = false;
        let mut restored = 0;
        for communicator in self.state.comms.iter_mut().flatten() {
            if let Some(saved) = position
                .collectives
                .iter()
                .find(|saved| saved.context == communicator.context)
            {
                communicator.collective_sequence = saved.collective_sequence;
                communicator.shared_memory_sequence = saved.shared_memory_sequence;
                restored += 1;
            }
        }
        restored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_round_trips_and_every_truncation_is_refused() {
        let position = CheckpointPosition {
            job: "job-7".to_string(),
            delivered: vec![0, 12, 3],
            sent: vec![1, 0, 9],
            ordinals: [4, 5, 6],
            collectives: vec![CollectivePosition {
                context: 2,
                collective_sequence: 17,
                shared_memory_sequence: 3,
            }],
            log: vec![1, 2, 3],
            output_bytes: 77,
        };
        let bytes = position.encode();
        assert_eq!(CheckpointPosition::decode(&bytes), Ok(position));
        for length in 0..bytes.len() {
            assert!(CheckpointPosition::decode(&bytes[..length]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(CheckpointPosition::decode(&longer).is_err());
        let mut other_version = bytes;
        other_version[0] = 9;
        assert!(CheckpointPosition::decode(&other_version).is_err());
    }
}
