#include "engine/decoder.h"

#include <algorithm>

namespace fak {
namespace {

// Length of the longest suffix of `text` that is a proper prefix of some stop string: that much text
// must be held back until the next token decides it.
size_t HeldBack(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const auto& s : stops) {
    for (size_t n = std::min(s.size() - 1, text.size()); n > hold; --n) {
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

}  // namespace

RequestDecoder::RequestDecoder(const Tokenizer& tokenizer, std::vector<int64_t> eos_ids,
                               const SamplingParams& sampling, DecodeLimits limits,
                               std::vector<int32_t> prompt)
    : tokenizer_(tokenizer),
      eos_ids_(std::move(eos_ids)),
      limits_(std::move(limits)),
      sampler_(sampling),
      detok_(tokenizer, {}, /*continuation=*/!prompt.empty(),  // the prompt's text comes before
             limits_.raw_text),
      history_(std::move(prompt)) {
  if (limits_.max_tokens <= 0) stop_reason_ = "length";
  if (limits_.grammar && limits_.grammar_trigger.empty()) {
    matcher_ = std::make_unique<grammar::Matcher>(limits_.grammar);
  }
}

Status RequestDecoder::Validate(const SamplingParams& sampling, const DecodeLimits& limits) {
  FAK_RETURN_IF_ERROR(sampling.Validate());
  for (const auto& s : limits.stop) {
    if (s.empty()) return InvalidArgument("stop strings must not be empty");
  }
  return Status::Ok();
}

std::string RequestDecoder::Finish(std::string reason) {
  stop_reason_ = std::move(reason);
  std::string out;
  if (stop_reason_ != "stop") {
    detok_.Flush(&pending_);
    out = std::move(pending_);
  }
  pending_.clear();
  return out;
}

std::string RequestDecoder::EndAtContext() { return done() ? std::string() : Finish("context"); }

Result<std::string> RequestDecoder::Step(std::span<float> logits) {
  if (done()) return Internal("decoder step after the request ended");
  if (matcher_) matcher_->Apply(logits);
  const int32_t tok = sampler_.Sample(logits, history_, step_++);
  if (matcher_ && !matcher_->Accept(tok)) {
    if (matcher_->automaton().overflowed()) {
      return InvalidArgument("the grammar is too ambiguous to follow (its automaton outgrew its limits)");
    }
    return Internal("the grammar allows no token here (every token was masked)");
  }
  const bool eos =
      !limits_.ignore_eos &&
      (tok == tokenizer_.eos_id() || std::find(eos_ids_.begin(), eos_ids_.end(), tok) != eos_ids_.end());
  if (eos) return Finish("eos");
  output_.push_back(tok);
  history_.push_back(tok);
  std::string piece;
  if (tok < tokenizer_.vocab_size()) FAK_RETURN_IF_ERROR(detok_.Push(tok, &piece));
  pending_ += piece;
  if (limits_.grammar && !matcher_) {
    // Waiting for the trigger: once it appears, the grammar takes the text after it.
    scanned_ += piece;
    const size_t at = scanned_.find(limits_.grammar_trigger);
    if (at != std::string::npos) {
      matcher_ = std::make_unique<grammar::Matcher>(limits_.grammar);
      const std::string after = scanned_.substr(at + limits_.grammar_trigger.size());
      if (!matcher_->AcceptBytes(after)) {
        matcher_.reset();  // the token ran past the trigger into text the grammar refuses: stay free
        limits_.grammar.reset();
      }
    } else if (scanned_.size() >= limits_.grammar_trigger.size()) {
      // Only text that may still begin the trigger is kept.
      scanned_.erase(0, scanned_.size() - (limits_.grammar_trigger.size() - 1));
    }
  }
  // A stop string ends the text before it.
  size_t cut = std::string::npos;
  for (const auto& s : limits_.stop) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    std::string out = pending_.substr(0, cut);
    Finish("stop");
    return out;
  }
  const size_t hold = HeldBack(pending_, limits_.stop);
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  next_ = tok;
  if (matcher_ && matcher_->Accepting() && !matcher_->CanContinue()) {
    out += Finish("grammar");
  } else if (static_cast<int64_t>(output_.size()) >= limits_.max_tokens) {
    out += Finish("length");
  }
  return out;
}

}  // namespace fak
