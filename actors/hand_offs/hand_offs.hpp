#pragma once

// A node's side of hand-offs (SPEC §4, storage/sql/offers.sql): once idle it
// offers permits it holds to submits of tasks due at once, which hand their
// tasks to it in their own transactions; it hears of each hand-off from the
// listener. This is the bookkeeping of those permits, out of the claim loop:
// what the offer holds, what a claim or a withdrawal takes back, and what is
// kept for hand-offs that submits took but this node has not heard of yet.
// Nothing here talks to anyone: the pusher asks the limiter and storage, tells
// the answers, and gives back the permits the methods say are free.

#include "node.pb.h"

#include <cstdint>
#include <map>
#include <optional>

namespace taskmill {

class hand_offs {
 public:
  /// `permits`: the size of an offer (0: this node offers nothing). Offers
  /// are numbered above `numbered_from` (the microseconds at the start: a
  /// node started again never offers under a number of its earlier run).
  hand_offs(int32_t permits, int64_t numbered_from);

  /// An offer that the claim loop may make or has made.
  struct offer {
    int64_t generation = 0;  // 0: none
    int32_t permits = 0;
  };

  /// Permits kept for hand-offs of the offer `generation` not heard of yet:
  /// they go back once `release(generation)` (a few seconds later, as a
  /// submit that took a permit may yet fail to commit), unless heard of.
  struct kept {
    int64_t generation = 0;
    int32_t permits = 0;
  };

  // -- making the offer --------------------------------------------------------

  /// The listener (re)connected: hand-offs are heard from now on, and what
  /// stands of the offer made before is not known.
  void listener_connected();
  /// No offer stands and this node makes them: one is due once it is idle.
  bool wants_offer() const;
  /// Permits to ask the limiter for a new offer; 0: none is to be made now.
  int32_t permits_to_offer() const;
  /// The permits to ask for to top the standing offer up, once hand-offs
  /// took half of it, so that a steady trickle of submits never finds it
  /// used up; none (0 permits) now.
  offer to_top_up() const;
  /// The limiter is being asked for permits of the offer (one ask at a time).
  void asking(bool under_way);
  /// With `permits` held, an offer is made under a new generation, to be
  /// stored; none if one stands already.
  std::optional<offer> make(int32_t permits);
  /// `permits` more held join the offer `generation`; false if it no longer
  /// is this node's (they are free).
  bool top_up(int64_t generation, int32_t permits);
  /// Storage did not make, or did not top up, the offer `generation` with
  /// `permits`: those free, if it still is this node's.
  int32_t refused(int64_t generation, int32_t permits);
  /// What stands of the offer `generation` is not known (a request about it
  /// failed): the next claim takes it back and counts what submits took.
  void in_doubt(int64_t generation);

  // -- hearing hand-offs -------------------------------------------------------

  /// The hand-offs heard, as executions for the dispatcher to run, holding
  /// the permits of the standing offer and those kept for hand-offs of one
  /// taken back (permits_held); the others take permits of their own. Tasks
  /// of offers made before the last read of what runs here are read again
  /// (their carried task cleared), whatever their notifications carried: the
  /// read may have found them, run them and seen them end.
  pb::Executions heard(pb::HandOffs& hand_offs);

  // -- taking the offer back ---------------------------------------------------

  /// The standing offer is taken back alone (the lease is in doubt, limits
  /// came to apply); none if none stands or it is being taken back.
  std::optional<offer> withdraw();
  /// Storage took `withdrawn` back: submits took `taken` of its permits.
  /// Those whose hand-offs were not heard of are kept; the rest are free.
  struct settled {
    kept keep;
    int32_t free = 0;
  };
  settled withdrawn(const offer& withdrawn, int32_t taken);
  /// A claim is about to be sent: the offer it takes back and whose permits
  /// join its own, after a claim that took all it could (`after_short_claim`
  /// false), once the offer was withdrawn, or when `permits_short` (the
  /// offer may hold them all); else none.
  offer take_over(bool after_short_claim, bool permits_short);
  /// The claim that took `over` back counted `handed_unheard` of its permits
  /// as taken by submits: answers those kept for hand-offs not heard of
  /// meanwhile (not the claim's).
  kept claim_took_back(const offer& over, int32_t handed_unheard);
  /// The answer of the claim that took `over` back was lost: the offer may
  /// stand yet. Its permits stay held for the next claim to take it back.
  void claim_lost(const offer& over);

  // -- permits kept for hand-offs not heard of --------------------------------

  /// Those kept for the offer `generation` are free: its tasks, if any, take
  /// permits of their own once heard of.
  int32_t release(int64_t generation);
  /// The tasks running here were read, hand-offs not heard of among them:
  /// all kept permits go to them.
  int32_t read_what_runs();

  bool standing() const { return generation_ != 0; }
  bool withdrawing() const { return withdrawn_; }
  int32_t offered() const { return offered_; }
  int32_t kept_permits() const;

 private:
  kept keep(int64_t generation, int32_t permits);

  int32_t permits_;
  int64_t last_generation_;
  // The offer that may stand in the database (0: none) and the permits held
  // for it that no hand-off heard of took over.
  int64_t generation_ = 0;
  int32_t offered_ = 0;
  bool asking_ = false;
  // It was taken back, or may have been (by a claim whose answer was lost).
  bool withdrawn_ = false;
  // An offer made before the listener connected would be in doubt at once.
  bool hearing_ = false;
  // The offer a claim under way takes back (0: none), and how many of its
  // hand-offs were heard of meanwhile: those took permits of their own.
  int64_t withdrawing_generation_ = 0;
  int32_t heard_while_withdrawing_ = 0;
  std::map<int64_t, int32_t> kept_for_unheard_;
  // The newest offer made before the last read of what runs here answered.
  // Hand-offs heard before that answer reached the dispatcher before it;
  // those of later offers were not in it.
  int64_t offers_before_read_ = 0;
};

}  // namespace taskmill
