// spm.cc - the C shim over SentencePiece's C++ API for `prepare-data` (see spm.h): training
// from a line callback, loading from bytes, piece look-ups, encoding. No exception or C++
// type crosses into C; it does not write files (the command writes them atomically).
#include "spm.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

// Exported by libsentencepiece 0.1.9x but not declared in its installed headers.
namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int v);
}
}  // namespace sentencepiece

struct spm_model {
    sentencepiece::SentencePieceProcessor sp;
    std::vector<int> buf;
};

namespace {

constexpr int kTrainThreads = 8;  // fixed: the EM sums per thread, so results depend on it
constexpr unsigned kSeed = 42;
// Sentences beyond this are sampled (reservoir, seeded): bounds the trainer's memory.
constexpr long kMaxSentences = 10000000;

void set_err(char *err, size_t n, const std::string &msg)
{
    if (err && n)
        std::snprintf(err, n, "%s", msg.c_str());
}

class CallbackIterator : public sentencepiece::SentenceIterator {
  public:
    CallbackIterator(spm_next_line next, void *user) : next_(next), user_(user) { Next(); }
    bool done() const override { return done_; }
    void Next() override
    {
        const char *line = nullptr;
        size_t len = 0;
        int rc = next_(user_, &line, &len);
        if (rc < 0) {
            rc_ = rc;
            status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal,
                                                   "reading the training text failed");
        }
        if (rc <= 0) {
            done_ = true;
            value_.clear();
            return;
        }
        value_.assign(line, len);
    }
    const std::string &value() const override { return value_; }
    sentencepiece::util::Status status() const override { return status_; }
    int rc() const { return rc_; }

  private:
    spm_next_line next_;
    void *user_;
    bool done_ = false;
    int rc_ = 0;
    std::string value_;
    sentencepiece::util::Status status_;
};

}  // namespace

extern "C" int spm_train(const char *model_type, int vocab_size, int lower_case, int layout,
                         spm_next_line next, void *user, char **model, size_t *model_len,
                         char *err, size_t errlen)
{
    try {
        // vocab_size counts every piece, the special ones too (hard_vocab_limit: exactly)
        std::string args = std::string("--model_type=") + model_type +
                           " --vocab_size=" + std::to_string(vocab_size) +
                           (layout == SPM_LAYOUT_T5
                                ? " --pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1"
                                  " --pad_piece=<pad> --eos_piece=</s> --unk_piece=<unk>"
                                : " --pad_id=0 --unk_id=1 --bos_id=-1 --eos_id=-1"
                                  " --pad_piece=[PAD] --unk_piece=[UNK]"
                                  " --control_symbols=[CLS],[SEP],[MASK]") +
                           " --normalization_rule_name=" +
                           (lower_case ? "nmt_nfkc_cf" : "nmt_nfkc") +
                           " --num_threads=" + std::to_string(kTrainThreads) +
                           " --input_sentence_size=" + std::to_string(kMaxSentences) +
                           " --shuffle_input_sentence=true";
        std::string proto;
        sentencepiece::logging::SetMinLogLevel(2);  // errors only; the status says what failed
        sentencepiece::SetRandomGeneratorSeed(kSeed);
        CallbackIterator it(next, user);
        auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
        if (it.rc() < 0)
            return it.rc();
        if (!st.ok()) {
            set_err(err, errlen, std::string("SentencePiece training failed: ") + st.ToString());
            return -EINVAL;
        }
        if (!(*model = static_cast<char *>(std::malloc(proto.size() ? proto.size() : 1)))) {
            set_err(err, errlen, "out of memory");
            return -ENOMEM;
        }
        std::memcpy(*model, proto.data(), proto.size());
        *model_len = proto.size();
        return 0;
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "out of memory");
        return -ENOMEM;
    } catch (const std::exception &e) {
        set_err(err, errlen, std::string("SentencePiece training failed: ") + e.what());
        return -EINVAL;
    }
}

extern "C" int spm_load(const void *model, size_t len, spm_model **out, char *err, size_t errlen)
{
    *out = nullptr;
    try {
        auto *m = new spm_model;
        auto st = m->sp.LoadFromSerializedProto(
            absl::string_view(static_cast<const char *>(model), len));
        if (!st.ok()) {
            delete m;
            set_err(err, errlen, std::string("not a SentencePiece model: ") + st.ToString());
            return -EINVAL;
        }
        *out = m;
        return 0;
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "out of memory");
        return -ENOMEM;
    } catch (const std::exception &e) {
        set_err(err, errlen, std::string("not a SentencePiece model: ") + e.what());
        return -EINVAL;
    }
}

extern "C" void spm_free(spm_model *m) { delete m; }

extern "C" int spm_piece_count(const spm_model *m) { return m->sp.GetPieceSize(); }

extern "C" int32_t spm_piece_id(const spm_model *m, const char *piece)
{
    int id = m->sp.PieceToId(piece);  // unknown pieces map to unk_id: check the spelling
    return id >= 0 && id < m->sp.GetPieceSize() && m->sp.IdToPiece(id) == piece ? id : -1;
}

extern "C" const char *spm_piece(const spm_model *m, int32_t id)
{
    return id >= 0 && id < m->sp.GetPieceSize() ? m->sp.IdToPiece(id).c_str() : nullptr;
}

extern "C" float spm_score(const spm_model *m, int32_t id)
{
    return id >= 0 && id < m->sp.GetPieceSize() ? m->sp.GetScore(id) : 0.0f;
}

extern "C" int32_t spm_meta_id(const spm_model *m, int which)
{
    switch (which) {
    case SPM_UNK: return m->sp.unk_id();
    case SPM_BOS: return m->sp.bos_id();
    case SPM_EOS: return m->sp.eos_id();
    case SPM_PAD: return m->sp.pad_id();
    default: return -1;
    }
}

extern "C" int spm_piece_kind(const spm_model *m, int32_t id)
{
    if (id < 0 || id >= m->sp.GetPieceSize())
        return -1;
    if (m->sp.IsControl(id))
        return SPM_CONTROL;
    if (m->sp.IsUnknown(id))
        return SPM_UNKNOWN;
    if (m->sp.IsByte(id))
        return SPM_BYTE;
    return SPM_NORMAL;
}

extern "C" int spm_encode(spm_model *m, const char *text, size_t len, int32_t **ids, size_t *n,
                          size_t *cap, char *err, size_t errlen)
{
    try {
        auto st = m->sp.Encode(absl::string_view(text, len), &m->buf);
        if (!st.ok()) {
            set_err(err, errlen, std::string("SentencePiece encoding failed: ") + st.ToString());
            return -EINVAL;
        }
        if (*n + m->buf.size() > *cap) {
            size_t c = *cap ? *cap : 1024;
            while (c < *n + m->buf.size())
                c *= 2;
            auto *g = static_cast<int32_t *>(std::realloc(*ids, c * sizeof **ids));
            if (!g) {
                set_err(err, errlen, "out of memory");
                return -ENOMEM;
            }
            *ids = g;
            *cap = c;
        }
        for (int id : m->buf)
            (*ids)[(*n)++] = id;
        return 0;
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "out of memory");
        return -ENOMEM;
    } catch (const std::exception &e) {
        set_err(err, errlen, std::string("SentencePiece encoding failed: ") + e.what());
        return -EINVAL;
    }
}
