#pragma once

// The typed interface of every actor of a node, in one place, so the message
// flow can be read here:
//
//   api --submit--> inserter --submit--> storage   inserter --wake--> pusher
//   storage (NOTIFY) --wake--> pusher          pusher --acquire--> limiter
//   pusher --claim, next_due--> storage --tasks, delay--> pusher
//   pusher --dispatch--> dispatcher
//   dispatcher --execute--> executor --outcome--> dispatcher
//   dispatcher --complete--> storage --acks--> dispatcher --release--> limiter
//   limiter --wake--> pusher

#include "messages/http.hpp"
#include "node.pb.h"

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/sec.hpp>
#include <caf/timespan.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace taskmill::pb {

/// Lets every protobuf message travel as a CAF message: serialized through
/// its wire format when CAF needs bytes, passed by value inside a node.
template <class Inspector, class Message>
std::enable_if_t<std::is_base_of_v<google::protobuf::MessageLite, Message>,
                 typename Inspector::result_type>
inspect(Inspector& f, Message& x) {
  std::string buf;
  if constexpr (Inspector::reads_state) x.SerializeToString(&buf);
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!x.ParseFromString(buf)) return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name(Message::descriptor()->full_name().c_str()), buf, load);
}

}  // namespace taskmill::pb

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(taskmill, caf::first_custom_type_id)

  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::Task))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::TaskList))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::SubmitTasks))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::SubmitResults))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::RescheduleRequest))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::RescheduleResult))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::CancelRequest))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::CancelResult))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::TaskOutcome))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::TaskOutcomes))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::OutcomeAcks))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::ResultReport))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::ResultAck))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::ClaimRequest))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::ClaimedTasks))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::AttemptList))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::ListTasksRequest))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::NodeList))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::Stats))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::BatchCounts))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::StorageStatus))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::PermitUse))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::PermitRelease))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::TypeSettingsList))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::ExecutorRegistration))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::Count))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::NodeRegistration))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::Heartbeat))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::HeartbeatAck))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::SweepRequest))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::SweepResult))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::Executions))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::Job))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::JobList))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::JobPutResult))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::JobFiring))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::JobFirings))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::DueJobs))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::JobPlans))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::FiringRound))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::JobMetrics))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::AlertList))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::AlertCheck))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::AlertRound))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::DeliveryResults))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::ListAlertsRequest))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::AlertMetrics))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::PeerLinks))

  CAF_ADD_ATOM(taskmill, taskmill, submit_atom, "submit")
  CAF_ADD_ATOM(taskmill, taskmill, reschedule_atom, "reschedule")
  CAF_ADD_ATOM(taskmill, taskmill, cancel_atom, "cancel")
  CAF_ADD_ATOM(taskmill, taskmill, claim_atom, "claim")
  CAF_ADD_ATOM(taskmill, taskmill, complete_atom, "complete")
  CAF_ADD_ATOM(taskmill, taskmill, status_atom, "status")
  CAF_ADD_ATOM(taskmill, taskmill, wake_atom, "wake")
  CAF_ADD_ATOM(taskmill, taskmill, reconnect_atom, "reconnect")
  CAF_ADD_ATOM(taskmill, taskmill, configure_atom, "configure")
  CAF_ADD_ATOM(taskmill, taskmill, acquire_atom, "acquire")
  CAF_ADD_ATOM(taskmill, taskmill, settle_atom, "settle")
  CAF_ADD_ATOM(taskmill, taskmill, release_atom, "release")
  CAF_ADD_ATOM(taskmill, taskmill, dispatch_atom, "dispatch")
  CAF_ADD_ATOM(taskmill, taskmill, finished_atom, "finished")
  CAF_ADD_ATOM(taskmill, taskmill, report_atom, "report")
  CAF_ADD_ATOM(taskmill, taskmill, list_atom, "list")
  CAF_ADD_ATOM(taskmill, taskmill, attempts_atom, "attempts")
  CAF_ADD_ATOM(taskmill, taskmill, retry_atom, "retry")
  CAF_ADD_ATOM(taskmill, taskmill, batch_atom, "batch")
  CAF_ADD_ATOM(taskmill, taskmill, stats_atom, "stats")
  CAF_ADD_ATOM(taskmill, taskmill, nodes_atom, "nodes")
  CAF_ADD_ATOM(taskmill, taskmill, capacity_atom, "capacity")
  CAF_ADD_ATOM(taskmill, taskmill, execute_atom, "execute")
  CAF_ADD_ATOM(taskmill, taskmill, register_atom, "register")
  CAF_ADD_ATOM(taskmill, taskmill, accepted_atom, "accepted")
  CAF_ADD_ATOM(taskmill, taskmill, result_atom, "result")
  CAF_ADD_ATOM(taskmill, taskmill, http_atom, "http")
  CAF_ADD_ATOM(taskmill, taskmill, heartbeat_atom, "heartbeat")
  CAF_ADD_ATOM(taskmill, taskmill, leave_atom, "leave")
  CAF_ADD_ATOM(taskmill, taskmill, sweep_atom, "sweep")
  CAF_ADD_ATOM(taskmill, taskmill, check_atom, "check")
  CAF_ADD_ATOM(taskmill, taskmill, compensate_atom, "compensate")
  CAF_ADD_ATOM(taskmill, taskmill, lead_atom, "lead")
  CAF_ADD_ATOM(taskmill, taskmill, pause_atom, "pause")
  CAF_ADD_ATOM(taskmill, taskmill, drain_atom, "drain")
  CAF_ADD_ATOM(taskmill, taskmill, reconcile_atom, "reconcile")
  CAF_ADD_ATOM(taskmill, taskmill, ping_atom, "ping")
  CAF_ADD_ATOM(taskmill, taskmill, watch_atom, "watch")
  CAF_ADD_ATOM(taskmill, taskmill, job_atom, "job")
  CAF_ADD_ATOM(taskmill, taskmill, jobs_atom, "jobs")
  CAF_ADD_ATOM(taskmill, taskmill, drop_atom, "drop")
  CAF_ADD_ATOM(taskmill, taskmill, enable_atom, "enable")
  CAF_ADD_ATOM(taskmill, taskmill, trigger_atom, "trigger")
  CAF_ADD_ATOM(taskmill, taskmill, firings_atom, "firings")
  CAF_ADD_ATOM(taskmill, taskmill, due_atom, "due")
  CAF_ADD_ATOM(taskmill, taskmill, fire_atom, "fire")
  CAF_ADD_ATOM(taskmill, taskmill, alerts_atom, "alerts")
  CAF_ADD_ATOM(taskmill, taskmill, deliver_atom, "deliver")
  CAF_ADD_ATOM(taskmill, taskmill, hello_atom, "hello")
  CAF_ADD_ATOM(taskmill, taskmill, join_atom, "join")
  CAF_ADD_ATOM(taskmill, taskmill, peers_atom, "peers")
  CAF_ADD_ATOM(taskmill, taskmill, live_atom, "live")
  CAF_ADD_ATOM(taskmill, taskmill, next_due_atom, "next_due")
  CAF_ADD_ATOM(taskmill, taskmill, running_atom, "running")
  CAF_ADD_ATOM(taskmill, taskmill, adopt_atom, "adopt")
  CAF_ADD_ATOM(taskmill, taskmill, offer_atom, "offer")
  CAF_ADD_ATOM(taskmill, taskmill, admitted_atom, "admitted")
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::Lead))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::HandOffs))

  CAF_ADD_ATOM(taskmill, taskmill, hand_off_atom, "hand_off")
  CAF_ADD_ATOM(taskmill, taskmill, make_offer_atom, "make_offer")
  CAF_ADD_ATOM(taskmill, taskmill, top_up_atom, "top_up")
  CAF_ADD_ATOM(taskmill, taskmill, take_back_atom, "take_back")
  CAF_ADD_ATOM(taskmill, taskmill, check_job_atom, "check_job")

  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::SubmitWorkflow))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::WorkflowSubmitted))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::Workflow))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::WorkflowList))
  CAF_ADD_ATOM(taskmill, taskmill, submit_workflow_atom, "submit_wf")
  CAF_ADD_ATOM(taskmill, taskmill, workflow_atom, "workflow")
  CAF_ADD_ATOM(taskmill, taskmill, workflows_atom, "workflows")
  CAF_ADD_ATOM(taskmill, taskmill, cancel_workflow_atom, "cancel_wf")
  CAF_ADD_ATOM(taskmill, taskmill, retry_workflow_atom, "retry_wf")
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::TakeCancels))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::CancelNotices))
  CAF_ADD_ATOM(taskmill, taskmill, take_cancels_atom, "take_cncl")
  CAF_ADD_ATOM(taskmill, taskmill, cancels_told_atom, "cncl_told")
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::Progress))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::ProgressReports))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::ProgressAcks))
  CAF_ADD_ATOM(taskmill, taskmill, progress_atom, "progress")
  CAF_ADD_ATOM(taskmill, taskmill, deadline_atom, "deadline")
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::AttemptLog))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::TaskLog))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::LogBatch))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::LogAcks))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::TaskLogRequest))
  CAF_ADD_ATOM(taskmill, taskmill, log_atom, "log")
  CAF_ADD_ATOM(taskmill, taskmill, read_log_atom, "read_log")
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::KeySpace))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::KeyState))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::KeySpaceState))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::KeySpaceList))
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::KeySpacePutResult))
  CAF_ADD_ATOM(taskmill, taskmill, key_spaces_atom, "key_spaces")
  CAF_ADD_ATOM(taskmill, taskmill, key_space_atom, "key_space")
  CAF_ADD_ATOM(taskmill, taskmill, put_key_space_atom, "put_keysp")
  CAF_ADD_ATOM(taskmill, taskmill, drop_key_space_atom, "drop_keysp")
  CAF_ADD_ATOM(taskmill, taskmill, key_atom, "key")
  CAF_ADD_ATOM(taskmill, taskmill, ready_atom, "ready")
  CAF_ADD_ATOM(taskmill, taskmill, alive_atom, "alive")
  CAF_ADD_ATOM(taskmill, taskmill, reload_atom, "reload")
  CAF_ADD_TYPE_ID(taskmill, (taskmill::pb::NextDue))

CAF_END_TYPE_ID_BLOCK(taskmill)
// clang-format on

namespace taskmill {

/// The timeout of requests between actors of one node on the hot path
/// (submits, claims, outcomes, the API's reads). The callee always answers,
/// with an error when it cannot, so they wait without one: CAF 0.17 keeps a
/// request's timeout in its clock until it expires, answered or not, and at
/// thousands of requests a second those held most of the node's memory.
inline constexpr caf::infinite_t local_request_timeout = caf::infinite;

/// CAF's heartbeat on cluster links, and how long a link may stay silent
/// before CAF drops it (configure_actor_system sets both). Each side of a
/// link also asks the other, at every heartbeat, whether it still admits
/// it, so that neither believes in a link the other dropped for longer than
/// the bound.
inline constexpr auto link_heartbeat_interval = std::chrono::milliseconds{500};
inline constexpr auto link_silence_bound = std::chrono::seconds{3};

/// Anything that answers while it processes its mailbox: readiness asks it.
using pingable_actor = caf::typed_actor<caf::replies_to<ping_atom>::with<caf::ok_atom>>;

/// Anything that can be told that due work may exist.
using wake_listener_actor = caf::typed_actor<caf::reacts_to<wake_atom>>;

/// Told that running attempts were cancelled (NOTIFY taskmill_cancels): the
/// dispatcher, which takes the cancels of the executions it runs.
using cancel_listener_actor = caf::typed_actor<caf::reacts_to<cancel_atom>>;

/// Claims for this node (the pusher, as the listener sees it): told when due
/// work may exist, of tasks that submits handed to this node
/// (storage/sql/offers.sql), and, after the listener (re)connected, that
/// hand-offs meanwhile went unheard.
using claim_waker_actor = wake_listener_actor::extend<caf::reacts_to<hand_off_atom, pb::HandOffs>,
                                                      caf::reacts_to<adopt_atom>>;

// -- storage: one actor type, several narrow views -----------------------------
// A node runs five storage actors (reads, the leader's duties and the
// listeners; submissions; claims; outcomes; heartbeats), each owning one
// PostgreSQL connection. Every other actor holds only the view it needs, so
// that, say, the inserter cannot claim.

/// Applies the rules of SPEC §3 (the inserter's view).
using submission_storage_actor = caf::typed_actor<
    caf::replies_to<submit_atom, pb::SubmitTasks>::with<pb::SubmitResults>,
    caf::replies_to<reschedule_atom, pb::RescheduleRequest>::with<pb::RescheduleResult>,
    caf::replies_to<cancel_atom, pb::CancelRequest>::with<pb::CancelResult>>;

/// Offers a node's permits to submits of tasks due at once, which hand
/// their tasks to it (storage/sql/offers.sql; the pusher's hand-off view).
using hand_off_storage_actor = caf::typed_actor<
    // Makes the request's offer (its node, permits, generation and
    // freshness); false: none was made (the node may not claim).
    caf::replies_to<make_offer_atom, pb::ClaimRequest>::with<bool>,
    // Adds so many permits to the node's offer of this generation; false: it
    // no longer stands.
    caf::replies_to<top_up_atom, std::string, int64_t, int32_t>::with<bool>,
    // Takes back the node's offer, of which it holds so many permits unheard
    // of; answers how many of them submits took.
    caf::replies_to<take_back_atom, std::string, int32_t>::with<int32_t>>;

/// Claims due tasks, taking the node's offer back where the request says so
/// (the pusher's view).
using claim_storage_actor = hand_off_storage_actor::extend<
    caf::replies_to<claim_atom, pb::ClaimRequest>::with<pb::ClaimedTasks>,
    // Whether work the request's node may claim came due that its claim did
    // not take, and when the next becomes due, by the database's clock.
    // Asked after a claim that took fewer tasks than it had permits for.
    caf::replies_to<next_due_atom, pb::ClaimRequest>::with<pb::NextDue>,
    // The executions running on a node by the database, asked after a claim
    // whose answer was lost: it may have committed.
    caf::replies_to<running_atom, std::string>::with<pb::Executions>>;

/// Stores outcomes, fenced by attempt (the dispatcher's view).
using outcome_storage_actor =
    caf::typed_actor<caf::replies_to<complete_atom, pb::TaskOutcomes>::with<pb::OutcomeAcks>,
                     // Of these executions, those that are over by the database.
                     caf::replies_to<check_atom, pb::Executions>::with<pb::Executions>,
                     // Of these executions, the tasks still running under their attempt.
                     caf::replies_to<running_atom, pb::Executions>::with<pb::TaskList>,
                     // Cancels of running attempts to tell their executors, taken.
                     caf::replies_to<take_cancels_atom, pb::TakeCancels>::with<pb::CancelNotices>,
                     // Cancels whose executors heard them, done; answers how many.
                     caf::replies_to<cancels_told_atom, pb::CancelNotices>::with<int32_t>,
                     // The ms left to a running attempt (task id, attempt) by its
                     // deadline, which it may have moved; 0 once past or over.
                     caf::replies_to<deadline_atom, int64_t, int32_t>::with<int64_t>>;

/// Stores progress reports and log lines of attempts (the progress actor's
/// view).
using progress_storage_actor = caf::typed_actor<
    // The latest report of each task, fenced by attempt; answers which applied.
    caf::replies_to<progress_atom, pb::ProgressReports>::with<pb::ProgressAcks>,
    // Log lines of attempts still their task's latest; answers the tasks taken.
    caf::replies_to<log_atom, pb::LogBatch>::with<pb::LogAcks>>;

/// Reads tasks, batches, stats and nodes, and retries by hand (the API's view).
using query_storage_actor =
    caf::typed_actor<caf::replies_to<caf::get_atom, int64_t>::with<pb::Task>,
                     caf::replies_to<list_atom, pb::ListTasksRequest>::with<pb::TaskList>,
                     caf::replies_to<attempts_atom, int64_t>::with<pb::AttemptList>,
                     // Lines of a task's attempt log after a line.
                     caf::replies_to<read_log_atom, pb::TaskLogRequest>::with<pb::TaskLog>,
                     // Makes a task pending and due now.
                     caf::replies_to<retry_atom, int64_t>::with<pb::Task>,
                     caf::replies_to<batch_atom, std::string>::with<pb::BatchCounts>,
                     // Makes the failed and dead tasks of a batch pending; answers how many.
                     caf::replies_to<retry_atom, std::string>::with<int32_t>,
                     // Task counts per type and status.
                     caf::replies_to<stats_atom>::with<pb::Stats>,
                     // The nodes, with those silent longer than the given milliseconds dead.
                     caf::replies_to<nodes_atom, int64_t>::with<pb::NodeList>,
                     caf::replies_to<alerts_atom, pb::ListAlertsRequest>::with<pb::AlertList>,
                     // Alerts by kind and deliveries by state (/metrics).
                     caf::replies_to<alerts_atom, stats_atom>::with<pb::AlertMetrics>,
                     // Pending, failed and running tasks per type, counted
                     // through their partial indexes (/metrics).
                     caf::replies_to<stats_atom, live_atom>::with<pb::Stats>,
                     // The config was reloaded: waiting reasons weigh the
                     // global limit of these settings from now on.
                     caf::reacts_to<reload_atom, pb::TypeSettingsList>>;

/// Whether the connection is up and migrated (readiness).
using storage_status_actor =
    caf::typed_actor<caf::replies_to<status_atom>::with<pb::StorageStatus>>;

/// A node's membership (the cluster's view).
using membership_storage_actor = caf::typed_actor<
    // A node takes its name; answers how many tasks of its earlier
    // incarnations ended as lost attempts.
    caf::replies_to<register_atom, pb::NodeRegistration>::with<int32_t>,
    // Renews a node's heartbeat, recording whether it leads; answers whether
    // it is alive.
    caf::replies_to<heartbeat_atom, pb::Heartbeat>::with<bool>,
    // Takes or keeps the lead for a lease, or gives it up; answers the term
    // this node leads under (0: it does not lead).
    caf::replies_to<lead_atom, pb::Lead>::with<int64_t>>;

/// One pass of the watcher (the watcher's view).
using sweep_storage_actor =
    caf::typed_actor<caf::replies_to<sweep_atom, pb::SweepRequest>::with<pb::SweepResult>>;

/// Runs compensation rule i; answers how many tasks it submitted (the
/// reconciler's view).
using compensation_storage_actor =
    // (rule, the term of the lead it runs under)
    caf::typed_actor<caf::replies_to<compensate_atom, int32_t, int64_t>::with<int32_t>>;

/// Writes and reads recurring jobs and their firings (the API's view).
using job_storage_actor = caf::typed_actor<
    // Puts a job whose next fire time and anchor the node set.
    caf::replies_to<job_atom, pb::Job>::with<pb::JobPutResult>,
    // What is wrong with putting this job, in the API's words (empty:
    // nothing); writes nothing.
    caf::replies_to<check_job_atom, pb::Job>::with<std::string>,
    caf::replies_to<job_atom, std::string>::with<pb::Job>,
    caf::replies_to<jobs_atom>::with<pb::JobList>,
    // Deletes a job and its ledger; answers whether there was one.
    caf::replies_to<drop_atom, std::string>::with<bool>,
    // Pauses (false) or resumes (true, next fire time in microseconds) a job.
    caf::replies_to<enable_atom, std::string, bool, int64_t>::with<pb::Job>,
    // Fires a job now, with this payload (JSON; empty: the job's); nodes
    // silent longer than the given milliseconds get no broadcast shard.
    caf::replies_to<trigger_atom, std::string, std::string, int64_t>::with<pb::JobFiring>,
    // A job's latest firings, at most n.
    caf::replies_to<firings_atom, std::string, int32_t>::with<pb::JobFirings>,
    // Every job's firings by outcome, last and next fire time (/metrics).
    caf::replies_to<jobs_atom, stats_atom>::with<pb::JobMetrics>>;

/// Writes and reads workflows (SPEC §10; the API's view).
using workflow_storage_actor = caf::typed_actor<
    // Stores a workflow's steps as tasks with their edges, or finds the
    // workflow of its key; nodes silent longer than the given milliseconds
    // get no broadcast shard.
    caf::replies_to<submit_workflow_atom, pb::SubmitWorkflow, int64_t>::with<pb::WorkflowSubmitted>,
    // A workflow with its steps and edges.
    caf::replies_to<workflow_atom, int64_t>::with<pb::Workflow>,
    // At most n workflows, newest first, older than the one of this id (0:
    // the newest), without steps.
    caf::replies_to<workflows_atom, int32_t, int64_t>::with<pb::WorkflowList>,
    // Cancels the unfinished tasks of a workflow, running ones too; answers
    // how many.
    caf::replies_to<cancel_workflow_atom, int64_t>::with<int32_t>,
    // Runs a workflow's dead, cancelled and skipped steps again; answers
    // how many.
    caf::replies_to<retry_workflow_atom, int64_t>::with<int32_t>>;

/// Reads and changes key spaces (SPEC §4 Keyed limits; the API's view).
using key_storage_actor = caf::typed_actor<
    caf::replies_to<key_spaces_atom>::with<pb::KeySpaceList>,
    // A key space with the given number of keys running most and with most
    // due tasks.
    caf::replies_to<key_space_atom, std::string, int32_t>::with<pb::KeySpaceState>,
    // Writes a key space; it holds at every node's next claim.
    caf::replies_to<put_key_space_atom, pb::KeySpace>::with<pb::KeySpacePutResult>,
    // Deletes a key space no type is keyed in (else a conflict naming
    // them); answers whether there was one.
    caf::replies_to<drop_key_space_atom, std::string>::with<bool>,
    // A key of a space (space, key) with at most n of its running and n of
    // its waiting tasks.
    caf::replies_to<key_atom, std::string, std::string, int32_t>::with<pb::KeyState>>;

/// Jobs due by now, and their planned firings (the cron actor's view).
using cron_storage_actor = caf::typed_actor<
    // At most n due jobs, oldest first, and when the next one is due.
    caf::replies_to<due_atom, int32_t>::with<pb::DueJobs>,
    // Writes firings and moves next fire times, each job only if nobody
    // moved it since it was read; answers them and when the next job is due.
    caf::replies_to<fire_atom, pb::JobPlans>::with<pb::FiringRound>,
    // Starts forwarding NOTIFY of job changes to the listener.
    caf::reacts_to<jobs_atom, caf::subscribe_atom, wake_listener_actor>>;

/// Raises alerts and keeps their deliveries (the alerter's view).
using alert_storage_actor = caf::typed_actor<
    // Raises the alerts the rules call for; answers them and the deliveries
    // due now, each taken for the lease it names.
    caf::replies_to<alerts_atom, pb::AlertCheck>::with<pb::AlertRound>,
    // Records how deliveries went; answers how many arrived.
    caf::replies_to<deliver_atom, pb::DeliveryResults>::with<int32_t>>;

/// Owns one PostgreSQL connection. Requests that arrive while a round trip is
/// under way are sent together in the next one. The node itself uses the
/// whole of it: start (settings, name) and stop (leave).
// clang-format off
using storage_actor = submission_storage_actor
    ::extend_with<claim_storage_actor>
    ::extend_with<outcome_storage_actor>
    ::extend_with<progress_storage_actor>
    ::extend_with<query_storage_actor>
    ::extend_with<storage_status_actor>
    ::extend_with<membership_storage_actor>
    ::extend_with<sweep_storage_actor>
    ::extend_with<compensation_storage_actor>
    ::extend_with<job_storage_actor>
    ::extend_with<workflow_storage_actor>
    ::extend_with<key_storage_actor>
    ::extend_with<cron_storage_actor>
    ::extend_with<alert_storage_actor>
    ::extend<
        // A node stops: what it still runs goes back to pending; answers how many.
        caf::replies_to<leave_atom, pb::Heartbeat>::with<int32_t>,
        // Writes the per-type settings of the node's configuration; answers how many.
        caf::replies_to<configure_atom, pb::TypeSettingsList>::with<int32_t>,
        // Starts forwarding NOTIFY wake-ups and the tasks handed to the node named
        // to the pusher, and tells it after each (re)connect.
        caf::reacts_to<caf::subscribe_atom, claim_waker_actor, std::string>,
        // Starts forwarding NOTIFY of cancelled running attempts.
        caf::reacts_to<cancel_atom, caf::subscribe_atom, cancel_listener_actor>,
        // Internal: the next round trip, and reconnect attempts.
        caf::reacts_to<caf::flush_atom>, caf::reacts_to<reconnect_atom>>;
// clang-format on

/// Validates submissions, reschedules and cancels, has storage apply the rules
/// of SPEC §3, and wakes the pusher when due work may have arrived.
using inserter_actor = pingable_actor::extend<
    caf::replies_to<submit_atom, pb::SubmitTasks>::with<pb::SubmitResults>,
    caf::replies_to<reschedule_atom, pb::RescheduleRequest>::with<pb::RescheduleResult>,
    caf::replies_to<cancel_atom, pb::CancelRequest>::with<pb::CancelResult>>;

/// Counts the tasks in flight on this node and hands out permits to claim
/// more, with the cluster-wide limits, which the claim enforces in the
/// database.
using limiter_actor = pingable_actor::extend<
    // What this node may claim now, for up to n tasks.
    caf::replies_to<acquire_atom, int32_t>::with<pb::ClaimGrant>,
    // What a claim used of its permits; the rest go back.
    caf::reacts_to<settle_atom, pb::PermitUse>,
    // Outcomes of these tasks are stored: their permits go back.
    caf::reacts_to<release_atom, pb::PermitRelease>,
    // The limits that hold now (a reload changes them), each with its use
    // as far as this node knows it: the node's limit first, its tasks in
    // flight as its use; then the global and the types' limits, used 0 (the
    // database counts those).
    caf::replies_to<stats_atom>::with<pb::Stats>,
    // This node's executors of a type can take this many tasks at a time.
    caf::reacts_to<capacity_atom, std::string, int32_t>,
    // Who to wake when permits come back.
    caf::reacts_to<caf::subscribe_atom, wake_listener_actor>,
    // The config was reloaded: the running limits of these settings (as the
    // database has them) hold from now on.
    caf::reacts_to<reload_atom, pb::TypeSettingsList>>;

/// Decides when to claim (a wake-up, its timer, permits coming back), claims
/// due tasks in weighted-fair batches and hands them to the dispatcher.
using pusher_actor = claim_waker_actor::extend_with<pingable_actor>::extend<
    // Stop (true) or resume (false) claiming: a node whose lease is in doubt
    // must not claim.
    caf::reacts_to<pause_atom, bool>,
    // Internal: the timer, with the generation it was set in.
    caf::reacts_to<caf::tick_atom, uint64_t>,
    // Internal: offer permits to submits unless a claim was sent since the
    // claim of this number.
    caf::reacts_to<offer_atom, uint64_t>,
    // Internal: permits kept for hand-offs of the offer of this generation
    // that were never heard of go back.
    caf::reacts_to<release_atom, int64_t>>;

/// Told the term of the lead this node holds (0: it does not lead); acts
/// only while it leads, under that term (taskmill.fence refuses a duty of a
/// term that is over).
using leader_duty_actor = caf::typed_actor<caf::reacts_to<lead_atom, int64_t>>;

/// A periodic leader's duty that answers pings.
using periodic_duty_actor = leader_duty_actor::extend_with<pingable_actor>;

/// Leader only, periodic: lost leases, timeouts, pending deadlines,
/// retention and purge (SPEC §5), in bounded batches.
using watcher_actor = periodic_duty_actor::extend<
    // Internal: the timer, with the generation it was set in.
    caf::reacts_to<caf::tick_atom, uint64_t>>;

/// Periodic: permits held for executions that are over by the database go
/// back (every node); compensation rules run (leader only).
using reconciler_actor = periodic_duty_actor::extend<
    // Internal: the timer.
    caf::reacts_to<caf::tick_atom, uint64_t>>;

/// Keeps this node's heartbeat, and with it its lease and its bid for
/// leadership; pauses claiming when the lease is in doubt.
using cluster_actor = pingable_actor::extend<
    // Whether this node is alive and leads, as of the last heartbeat.
    caf::replies_to<status_atom>::with<pb::HeartbeatAck>,
    // The node is stopping: it gives up the lead and registers again no
    // more; answered once that holds.
    caf::replies_to<leave_atom>::with<caf::ok_atom>,
    // Internal: the heartbeat timer.
    caf::reacts_to<caf::tick_atom>>;

/// Leader only: fires recurring jobs at their times (SPEC §6), with one timer
/// to the next fire time of all jobs; woken when jobs change.
using cron_actor = periodic_duty_actor::extend_with<wake_listener_actor>::extend<
    // Internal: the timer, with the generation it was set in.
    caf::reacts_to<caf::tick_atom, uint64_t>>;

/// Leader only, periodic: raises alerts (SPEC §6) from what the inbox,
/// finished batches and overdue types show, logs them, and delivers them to
/// the webhooks with retries and backoff that outlive the node.
using alerter_actor = periodic_duty_actor::extend<
    // Internal: the timer, with the generation it was set in.
    caf::reacts_to<caf::tick_atom, uint64_t>,
    // Internal: a webhook answered (alert id, url, error; empty: delivered).
    caf::reacts_to<deliver_atom, int64_t, std::string, std::string>,
    // The config was reloaded: these rules (config's alert_rules_json) hold
    // from the next pass on.
    caf::reacts_to<reload_atom, std::string>>;

/// The HTTP API (SPEC §8): routes requests, decodes and encodes JSON and
/// protobuf bodies, checks the token, asks the other actors.
using api_actor = caf::typed_actor<caf::reacts_to<http_atom, http_exchange>>;

/// Whether the node is ready (/readyz, the service manager's READY) or alive
/// (the service manager's watchdog), asking every actor within the patience
/// given: answers the first problem found, empty when none.
using readiness_actor = caf::typed_actor<
    // Ready: every actor answers, every storage connection is up and migrated.
    caf::replies_to<ready_atom, caf::timespan>::with<std::string>,
    // Alive: every actor answers, connected to PostgreSQL or not.
    caf::replies_to<alive_atom, caf::timespan>::with<std::string>>;

/// Tells the service manager (systemd's notify protocol) when the node is
/// ready, and pets its watchdog while the node is alive.
using service_notifier_actor = caf::typed_actor<
    // Internal: see whether the node is ready yet.
    caf::reacts_to<ready_atom>,
    // Internal: see whether the node is alive, and pet the watchdog if so.
    caf::reacts_to<alive_atom>>;

/// Watches every actor of a node (see actors/supervisor.hpp): one that ends
/// while the node runs fails the node.
using supervisor_actor = caf::typed_actor<
    // Watch this actor under this name.
    caf::reacts_to<watch_atom, std::string, caf::actor>>;

/// A CAF executor: runs one task and answers its outcome. The task carries
/// what running it takes (identity, payload, attempt, timeout, batch and
/// shard, trace id, retry count, max retries, last error), not its timestamps
/// or backoff settings.
using executor_actor =
    caf::typed_actor<caf::replies_to<execute_atom, pb::Task>::with<pb::TaskOutcome>,
                     // Stop running (task id, attempt): the task was cancelled, its
                     // outcome is no longer waited for.
                     caf::reacts_to<cancel_atom, int64_t, int32_t>>;

/// Takes what running attempts say of themselves (the API's, executors'):
/// progress reports, of which it keeps the latest of each task, and log
/// lines; it stores each kind together, one statement at a time and at most
/// one a round (100 ms). A report
/// or a log is answered once stored, or refused (the task no longer runs
/// under that attempt; a log: the attempt is no longer its task's latest).
using progress_actor = pingable_actor::extend<
    caf::replies_to<progress_atom, int64_t, pb::Progress>::with<pb::ResultAck>,
    caf::replies_to<log_atom, int64_t, pb::AttemptLog>::with<pb::ResultAck>,
    // Internal: a round is over, what waits may be stored.
    caf::reacts_to<caf::flush_atom>>;

/// Runs claimed tasks on their executors, enforces their timeouts and reports
/// outcomes to storage; permits go back once an outcome is stored. Told of
/// cancels (cancel_atom), it takes them from storage and stops those
/// executions, telling their executors.
using dispatcher_actor = pingable_actor::extend_with<cancel_listener_actor>::extend<
    caf::reacts_to<dispatch_atom, pb::TaskList>,
    // A CAF executor offers to run tasks of some types; answers how many.
    caf::replies_to<register_atom, executor_actor, pb::ExecutorRegistration>::with<int32_t>,
    // A CAF (or remote) executor's progress report for (task id), passed to
    // the progress actor.
    caf::replies_to<progress_atom, int64_t, pb::Progress>::with<pb::ResultAck>,
    // A CAF (or remote) executor's log lines for (task id), passed to the
    // progress actor.
    caf::replies_to<log_atom, int64_t, pb::AttemptLog>::with<pb::ResultAck>,
    // A result for (task id) sent to POST /v1/tasks/{id}/result.
    caf::replies_to<result_atom, int64_t, pb::ResultReport>::with<pb::ResultAck>,
    // Internal: an HTTP executor answered 202; the result comes later.
    caf::reacts_to<accepted_atom, int64_t, int32_t>,
    // Drops executions that are over by the database, giving their permits
    // back (e.g. a 202 whose result went to another node).
    caf::reacts_to<reconcile_atom>,
    // Executions running here by the database, read after a claim whose
    // answer was lost, or handed to this node by submits: runs those it does
    // not know of and the database still has running under their attempt.
    caf::reacts_to<adopt_atom, pb::Executions>,
    // Waits until nothing runs here any more, at most the given milliseconds;
    // answers how many executions were still running then.
    caf::replies_to<drain_atom, int64_t>::with<int32_t>,
    // Internal: the drain's time is up.
    caf::reacts_to<drain_atom>,
    // Internal: an asynchronous execution finished.
    caf::reacts_to<finished_atom, pb::TaskOutcome>,
    // Internal: the timeout of (task id, attempt) expired.
    caf::reacts_to<caf::timeout_atom, int64_t, int32_t>,
    // Internal: report the outcomes gathered so far.
    caf::reacts_to<caf::flush_atom>,
    // Internal: report the oldest batch of outcomes storage failed to take
    // again.
    caf::reacts_to<report_atom>,
    // Who to wake when a retry is stored: it comes due after its backoff,
    // and the pushers here and on the peers set their timers by it.
    caf::reacts_to<caf::subscribe_atom, wake_listener_actor>>;

/// What a node publishes on cluster.listen (SPEC §7), for other nodes and
/// remote executors. A caller is admitted after a challenge-response over
/// cluster.secret; until then only hello and join are answered.
using peer_actor = wake_listener_actor::extend<
    // hello(caller name, caller nonce): answers this node's name, its nonce,
    // and its proof of the secret over the caller's nonce.
    caf::replies_to<hello_atom, std::string, std::string>::with<std::string, std::string,
                                                                std::string>,
    // join(caller name, kind "node" | "executor", proof over this node's
    // nonce): admits the caller; answers whether it was.
    caf::replies_to<join_atom, std::string, std::string, std::string>::with<bool>,
    // Whether this node admits the caller: one that finds it does not (the
    // node dropped its side of the link while CAF's connection stayed up)
    // links again.
    caf::replies_to<admitted_atom>::with<bool>,
    // An admitted remote executor (an executor_actor, sent untyped: typed
    // handles do not cross the wire) offers to run tasks of some types;
    // answers how many types it took.
    caf::replies_to<register_atom, caf::actor, pb::ExecutorRegistration>::with<int32_t>,
    // An admitted remote executor's progress report for (task id).
    caf::replies_to<progress_atom, int64_t, pb::Progress>::with<pb::ResultAck>,
    // An admitted remote executor's log lines for (task id).
    caf::replies_to<log_atom, int64_t, pb::AttemptLog>::with<pb::ResultAck>>;

/// Keeps this node's links to the other nodes (from cluster.seeds and the
/// addresses in taskmill.nodes) and to remote executors, forwards wake-ups
/// both ways, and shows the links. A wake-up from a peer wakes this node's
/// pusher; one from this node (the inserter, the limiter) goes to the peers.
using peers_actor = peer_actor::extend_with<pingable_actor>::extend<
    caf::replies_to<peers_atom>::with<pb::PeerLinks>,
    // Internal: look for nodes to link to.
    caf::reacts_to<caf::tick_atom>,
    // Internal: ask the linked nodes whether they still admit this one.
    caf::reacts_to<check_atom>>;

}  // namespace taskmill
