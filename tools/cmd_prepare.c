/* cmd_prepare.c - `zerotrain prepare-data`: text files -> token shards + manifest.json
 * (docs/data-format.md) with a WordPiece vocab.txt, a SentencePiece model it trains or one
 * it is given, or a Hugging Face model folder's tokenizer (tokenizer.h); the dataset keeps the
 * tokenizer's files as save_pretrained writes them. One document per input file. It does not
 * clean markup or deduplicate text. */
#include "cli.h"
#include "outdir.h"
#include "spm.h"
#include "tokenizer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { TOK_WORDPIECE, TOK_SPM_TRAIN, TOK_SPM_MODEL, TOK_FOLDER };

typedef struct paths { char **v; size_t n, cap; } paths;

typedef struct prep {
    int kind;
    const char *spec_arg;        /* VOCAB_TXT, N, MODEL or MODEL_DIR */
    int family;                  /* --model-type: TOK_BERT, TOK_T5, TOK_ANY (not given) */
    const char *spm_type;        /* "unigram" or "bpe" */
    long spm_pieces;
    const char *out;
    char *out_real;              /* realpath of --out if it already exists: not walked */
    int lower;                   /* -1 = the tokenizer's default */
    uint64_t shard_tokens;
    paths files;
    tok_tokenizer *tk;
    char *model_bytes;           /* SentencePiece model (trained or read) */
    size_t model_len;
    char *vocab_text;            /* spm.vocab of a trained model */
    size_t vocab_len;
    zt_tokenizer_info tok;
    zt_token_writer *w;
    outdir *dir;                 /* --out, locked; written as a staging folder */
    const char *stage;
    /* reading */
    char *buf;
    size_t buf_cap;
    /* progress */
    int tty;
    double t0, last_print;
    uint64_t bytes_done, bytes_total, tokens, docs;
    size_t files_done;
    char err[1024];
} prep;

/* ---- small file helpers --------------------------------------------------------------- */

static int paths_add(paths *p, const char *s)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        char **g = realloc(p->v, cap * sizeof *g);
        if (!g)
            return -ENOMEM;
        p->v = g;
        p->cap = cap;
    }
    if (!(p->v[p->n] = strdup(s)))
        return -ENOMEM;
    p->n++;
    return 0;
}

static void paths_free(paths *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i]);
    free(p->v);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int grow_buf(prep *p, size_t need, const char *path)
{
    size_t cap = p->buf_cap ? p->buf_cap : 1 << 16;
    char *g;
    while (cap < need)
        cap *= 2;
    if (cap == p->buf_cap)
        return 0;
    if (!(g = realloc(p->buf, cap))) {
        snprintf(p->err, sizeof p->err, "%s: out of memory reading %zu bytes", path, need);
        return -1;
    }
    p->buf = g;
    p->buf_cap = cap;
    return 0;
}

/* Reads a whole file (to EOF, so /proc files and pipes work too) into p->buf, NUL-terminated;
 * returns its length or -1 with p->err set. */
/* Opens an input, a regular file only (zt_open_regular: a FIFO is refused, not waited on),
 * and fstats it; returns the descriptor or -1 with p->err set. */
static int open_input(prep *p, const char *path, struct stat *sb)
{
    int fd = zt_open_regular(path, 0);
    if (fd < 0) {
        snprintf(p->err, sizeof p->err, "%s", zt_last_error());
        return -1;
    }
    if (fstat(fd, sb) != 0) {
        snprintf(p->err, sizeof p->err, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static long read_file(prep *p, const char *path)
{
    struct stat sb;
    size_t got = 0;
    int fd = open_input(p, path, &sb);
    if (fd < 0)
        return -1;
    if (grow_buf(p, (size_t)sb.st_size + 1, path) < 0) {
        close(fd);
        return -1;
    }
    for (;;) {
        ssize_t r;
        if (got + 1 == p->buf_cap && grow_buf(p, p->buf_cap + 1, path) < 0) {
            close(fd);
            return -1;
        }
        r = read(fd, p->buf + got, p->buf_cap - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(p->err, sizeof p->err, "%s: read: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    p->buf[got] = '\0';
    return (long)got;
}

/* Writes STAGE/name (zt_file_write_atomic: temporary file, fsync, rename, fsync). */
static int write_output(prep *p, const char *name, const void *data, size_t len)
{
    char path[PATH_MAX];
    const void *parts[1] = {data};
    snprintf(path, sizeof path, "%s/%s", p->stage, name);
    if (zt_file_write_atomic(path, parts, &len, 1) < 0) {
        snprintf(p->err, sizeof p->err, "%s", zt_last_error());
        return -1;
    }
    return 0;
}

/* Whether name is an entry prepare-data writes into --out (or the temporary file of one of
 * its atomic writes, left by a killed run): a folder holding anything else is not replaced. */
static int ours(const char *name)
{
    static const char *const fixed[] = {"manifest.json", "vocab.txt", "spm.model", "spm.vocab",
                                        "spiece.model", "tokenizer_config.json",
                                        "special_tokens_map.json", "added_tokens.json"};
    /* zt_file_write_atomic's temporary file: "X.tmp." and six random characters; judge X */
    static const char mark[] = ".tmp.";
    const size_t tail = sizeof mark - 1 + 6;
    size_t n = strlen(name), digits = 0;
    if (n > tail && !strncmp(name + n - tail, mark, sizeof mark - 1))
        n -= tail;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strlen(fixed[i]) == n && !strncmp(name, fixed[i], n))
            return 1;
    if (n < 6 + 5 + 4 || strncmp(name, "shard-", 6) || strncmp(name + n - 4, ".zts", 4))
        return 0;
    for (size_t i = 6; i < n - 4; i++)
        digits += name[i] >= '0' && name[i] <= '9';
    return digits == n - 10;
}

/* ---- inputs --------------------------------------------------------------------------- */

/* The files under dir, recursively: hidden entries, symlinked folders, dangling symlinks and
 * the output folder are skipped; anything else that is not a folder is listed, so that
 * collect_inputs refuses a FIFO, device or socket by name rather than leave it out unseen. */
static int walk(prep *p, const char *dir, paths *out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[PATH_MAX], real[PATH_MAX];
    int rc = 0;
    if (!d) {
        snprintf(p->err, sizeof p->err, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (p->out_real && realpath(dir, real) && strcmp(real, p->out_real) == 0) {
        closedir(d);
        return 0;
    }
    while (rc == 0 && (e = readdir(d))) {
        struct stat sb;
        if (e->d_name[0] == '.')
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path) {
            snprintf(p->err, sizeof p->err, "%s/%s: path too long", dir, e->d_name);
            rc = -1;
            break;
        }
        if (lstat(path, &sb) != 0) {
            snprintf(p->err, sizeof p->err, "%s: %s", path, strerror(errno));
            rc = -1;
        } else if (S_ISDIR(sb.st_mode)) {
            rc = walk(p, path, out);
        } else if (!S_ISLNK(sb.st_mode) || (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))) {
            if (paths_add(out, path) < 0) {
                snprintf(p->err, sizeof p->err, "out of memory");
                rc = -1;
            }
        }
    }
    closedir(d);
    return rc;
}

static int collect_inputs(prep *p, char **inputs, int n)
{
    for (int i = 0; i < n; i++) {
        struct stat sb;
        const char *in = inputs[i];
        if (stat(in, &sb) != 0) {
            snprintf(p->err, sizeof p->err, "%s: %s", in, strerror(errno));
            return -1;
        }
        if (S_ISDIR(sb.st_mode)) {
            paths found = {0};
            char trimmed[PATH_MAX];
            size_t len = strlen(in);
            if (len >= sizeof trimmed) {
                snprintf(p->err, sizeof p->err, "%s: path too long", in);
                return -1;
            }
            memcpy(trimmed, in, len + 1);
            while (len > 1 && trimmed[len - 1] == '/')
                trimmed[--len] = '\0';
            if (walk(p, trimmed, &found) < 0) {
                paths_free(&found);
                return -1;
            }
            if (found.n == 0) {
                paths_free(&found);
                snprintf(p->err, sizeof p->err, "%s: the folder holds no files", in);
                return -1;
            }
            qsort(found.v, found.n, sizeof *found.v, cmp_str);
            for (size_t k = 0; k < found.n; k++) {
                if (paths_add(&p->files, found.v[k]) < 0) {
                    paths_free(&found);
                    snprintf(p->err, sizeof p->err, "out of memory");
                    return -1;
                }
            }
            paths_free(&found);
        } else if (paths_add(&p->files, in) < 0) {
            snprintf(p->err, sizeof p->err, "out of memory");
            return -1;
        }
    }
    /* every input is a regular file, checked before anything is written (read_file checks
     * again as it reads, should one be replaced in between) */
    for (size_t i = 0; i < p->files.n; i++) {
        struct stat sb;
        int fd = open_input(p, p->files.v[i], &sb);
        if (fd < 0)
            return -1;
        close(fd);
        p->bytes_total += (uint64_t)sb.st_size;
    }
    return 0;
}

/* ---- progress ------------------------------------------------------------------------- */

static void progress(prep *p, const char *phase, int force)
{
    double t = now();
    if (!p->tty || (!force && t - p->last_print < 0.2))
        return;
    p->last_print = t;
    double mb = p->bytes_done / 1e6, dt = t - p->t0;
    fprintf(stderr, "\r\033[Kprepare-data: %s %zu/%zu files, %.1f/%.1f MB, %.1f MB/s, %" PRIu64
            " tokens", phase, p->files_done, p->files.n, mb, p->bytes_total / 1e6,
            dt > 0 ? mb / dt : 0.0, p->tokens);
    fflush(stderr);
}

static void progress_done(prep *p)
{
    if (p->tty) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

/* ---- tokenizers ----------------------------------------------------------------------- */

static int parse_spec(prep *p, const char *spec)
{
    const char *colon = strchr(spec, ':');
    size_t k = colon ? (size_t)(colon - spec) : 0;
    struct stat sb;
    if (stat(spec, &sb) == 0 && S_ISDIR(sb.st_mode)) { /* a model folder */
        p->kind = TOK_FOLDER;
        p->spec_arg = spec;
        return 0;
    }
    if (!colon || !colon[1])
        return -1;
    p->spec_arg = colon + 1;
    if (k == 9 && !strncmp(spec, "wordpiece", k)) {
        p->kind = TOK_WORDPIECE;
    } else if (k == 3 && !strncmp(spec, "spm", k)) {
        p->kind = TOK_SPM_MODEL;
    } else if (k == 13 && !strncmp(spec, "sentencepiece", k)) {
        char num[32];
        const char *type = strchr(p->spec_arg, ':');
        size_t len = type ? (size_t)(type - p->spec_arg) : strlen(p->spec_arg);
        p->kind = TOK_SPM_TRAIN;
        p->spm_type = "unigram";
        if (type && strcmp(type + 1, "unigram") && strcmp(type + 1, "bpe"))
            return -1;
        if (type)
            p->spm_type = type + 1;
        if (len == 0 || len >= sizeof num)
            return -1;
        memcpy(num, p->spec_arg, len);
        num[len] = '\0';
        if (parse_int(num, "the number of SentencePiece pieces", 8, 1 << 20, &p->spm_pieces))
            return -2;
    } else {
        return -1;
    }
    return 0;
}

static const char *family_name(int f) { return f == TOK_T5 ? "t5" : "bert"; }

/* The tokenizer's family against --model-type, its lower-casing against --lower-case */
static int check_tokenizer(prep *p)
{
    int lc = tok_lower_case(p->tk);
    if (p->family != TOK_ANY && tok_family(p->tk) != p->family) {
        snprintf(p->err, sizeof p->err, "%s: the tokenizer is %s's (%s), not %s's as "
                 "--model-type says", p->spec_arg, family_name(tok_family(p->tk)),
                 tok_hf_class(p->tk), family_name(p->family));
        return -1;
    }
    if (p->lower >= 0 && p->lower != lc) {
        snprintf(p->err, sizeof p->err, "%s: the tokenizer %s lower-case; drop "
                 "--%slower-case (it cannot be changed for an existing tokenizer)", p->spec_arg,
                 lc ? "does" : "does not", p->lower ? "" : "no-");
        return -1;
    }
    p->lower = lc;
    tok_manifest_info(p->tk, &p->tok);
    return 0;
}

/* Loads what can be loaded before anything is written: the vocab, the given model or the
 * model folder's tokenizer. */
static int load_tokenizer(prep *p)
{
    if (p->kind == TOK_WORDPIECE) {
        if (p->family == TOK_T5) {
            snprintf(p->err, sizeof p->err, "wordpiece:%s: WordPiece is BERT's tokenizer, not "
                     "T5's (T5 takes a SentencePiece model)", p->spec_arg);
            return -1;
        }
        if (p->lower < 0)
            p->lower = 1; /* HF BertTokenizer's default, do_lower_case=True */
        if (tok_load_wordpiece(p->spec_arg, p->lower, &p->tk, p->err, sizeof p->err) < 0)
            return -1;
        return check_tokenizer(p);
    }
    if (p->kind == TOK_SPM_MODEL) {
        long len = read_file(p, p->spec_arg);
        if (len < 0)
            return -1;
        if (tok_load_spm(p->spec_arg, p->buf, (size_t)len, p->family, &p->tk, p->err,
                         sizeof p->err) < 0)
            return -1;
        return check_tokenizer(p);
    }
    if (p->kind == TOK_FOLDER) {
        if (tok_load_folder(p->spec_arg, &p->tk, p->err, sizeof p->err) < 0)
            return -1;
        return check_tokenizer(p);
    }
    if (p->lower < 0)
        p->lower = 0; /* a new model keeps case unless asked */
    return 0;
}

/* Training sentences: the non-blank lines of every input file. */
typedef struct line_iter { prep *p; size_t file; long len, pos; uint64_t lines; } line_iter;

static int next_line(void *user, const char **line, size_t *len)
{
    line_iter *it = user;
    prep *p = it->p;
    for (;;) {
        while (it->pos < it->len) {
            char *s = p->buf + it->pos, *nl = memchr(s, '\n', (size_t)(it->len - it->pos));
            size_t n = nl ? (size_t)(nl - s) : (size_t)(it->len - it->pos), k;
            it->pos += (long)n + 1;
            if (n && s[n - 1] == '\r')
                n--;
            for (k = 0; k < n && (s[k] == ' ' || s[k] == '\t'); k++)
                ;
            if (k == n)
                continue;
            *line = s;
            *len = n;
            it->lines++;
            return 1;
        }
        if (it->file > 0) {
            p->files_done++;
            p->bytes_done += (uint64_t)it->len;
            progress(p, "reading for training", 0);
        }
        if (it->file == p->files.n) {
            if (p->tty) { /* SentencePiece trains now and reports nothing until it is done */
                fprintf(stderr, "\r\033[Kprepare-data: training a SentencePiece %s model of %ld "
                        "pieces on %" PRIu64 " lines (%.1f MB)...", p->spm_type, p->spm_pieces,
                        it->lines, p->bytes_done / 1e6);
                fflush(stderr);
            }
            return 0;
        }
        if ((it->len = read_file(p, p->files.v[it->file++])) < 0)
            return -1;
        it->pos = 0;
    }
}

/* Trains the model in memory (nothing is written yet) and fills p->tok. */
static int train_spm(prep *p)
{
    line_iter it = {p, 0, 0, 0, 0};
    int32_t ids[5];
    size_t cap = 0;
    int rc;
    const int t5 = p->family == TOK_T5;
    static const char *const bert_names[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"},
                             *const t5_names[3] = {"<pad>", "</s>", "<unk>"};
    spm_model *spm = NULL;

    p->t0 = now();
    rc = spm_train(p->spm_type, (int)p->spm_pieces, p->lower,
                   t5 ? SPM_LAYOUT_T5 : SPM_LAYOUT_BERT, next_line, &it, &p->model_bytes,
                   &p->model_len, p->err, sizeof p->err);
    progress_done(p);
    p->files_done = 0;
    p->bytes_done = 0;
    if (rc < 0 || spm_load(p->model_bytes, p->model_len, &spm, p->err, sizeof p->err) < 0)
        return -1;
    /* the layout spm_train was asked for, and exactly N pieces; check rather than assume */
    for (int k = 0; k < (t5 ? 3 : 5); k++) {
        const char *name = t5 ? t5_names[k] : bert_names[k];
        if ((ids[k] = spm_piece_id(spm, name)) != k) {
            snprintf(p->err, sizeof p->err, "SentencePiece put %s at id %d, not %d", name,
                     ids[k], k);
            goto fail;
        }
    }
    if (spm_piece_count(spm) != p->spm_pieces) {
        snprintf(p->err, sizeof p->err, "SentencePiece made %d pieces, not %ld",
                 spm_piece_count(spm), p->spm_pieces);
        goto fail;
    }
    if (tok_load_spm("the trained model", p->model_bytes, p->model_len,
                     t5 ? TOK_T5 : TOK_BERT, &p->tk, p->err, sizeof p->err) < 0)
        goto fail;
    tok_manifest_info(p->tk, &p->tok);
    /* spm.vocab: "piece<TAB>score" per line, as spm_train writes it */
    for (int32_t i = 0; i < spm_piece_count(spm); i++) {
        const char *piece = spm_piece(spm, i);
        size_t need = p->vocab_len + strlen(piece) + 40;
        if (need > cap) {
            char *g = realloc(p->vocab_text, cap = 2 * need);
            if (!g) {
                snprintf(p->err, sizeof p->err, "out of memory");
                goto fail;
            }
            p->vocab_text = g;
        }
        p->vocab_len += (size_t)snprintf(p->vocab_text + p->vocab_len, cap - p->vocab_len,
                                         "%s\t%g\n", piece, (double)spm_score(spm, i));
    }
    spm_free(spm);
    return 0;
fail:
    spm_free(spm);
    return -1;
}

/* ---- tokenizing ----------------------------------------------------------------------- */

static int encode_text(prep *p, const char *text, size_t len, int32_t **ids, size_t *n,
                       size_t *cap)
{
    /* special tokens written in the text stay text: a corpus that mentions "[SEP]" or
     * "</s>" does not get separators inside its documents */
    if (!strcmp(p->tok.type, "wordpiece"))
        return tok_text_ids(p->tk, text, len, TOK_SPLIT_SPECIAL, ids, n, cap, p->err,
                            sizeof p->err);
    /* SentencePiece: line by line, as it was trained; byte-level BPE too, as RoBERTa's
     * pretraining data was encoded (fairseq's encoder, HF's run_mlm: per line, without the
     * newline) */
    for (size_t pos = 0; pos < len;) {
        const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
        size_t m = nl ? (size_t)(nl - s) : len - pos;
        pos += m + 1;
        if (m && s[m - 1] == '\r') /* as for training: CRLF text encodes like LF text */
            m--;
        if (tok_text_ids(p->tk, s, m, TOK_SPLIT_SPECIAL, ids, n, cap, p->err, sizeof p->err) < 0)
            return -1;
    }
    return 0;
}

static int tokenize_all(prep *p)
{
    int32_t *ids = NULL;
    size_t cap = 0;
    int rc = 0;
    p->t0 = now();
    for (size_t i = 0; i < p->files.n && rc == 0; i++) {
        const char *path = p->files.v[i];
        long len = read_file(p, path);
        size_t n = 0;
        if (len < 0 || encode_text(p, p->buf, (size_t)len, &ids, &n, &cap) < 0) {
            rc = -1;
            break;
        }
        if (zt_token_writer_add(p->w, ids, n, path) < 0) {
            snprintf(p->err, sizeof p->err, "%s", zt_last_error());
            rc = -1;
            break;
        }
        if (i == 0)
            outdir_fault("tokenized");
        if (n) {
            p->tokens += n + 1;
            p->docs++;
        }
        p->files_done++;
        p->bytes_done += (uint64_t)len;
        progress(p, "tokenizing", i + 1 == p->files.n);
    }
    progress_done(p);
    free(ids);
    return rc;
}

/* ---- the command ---------------------------------------------------------------------- */

/* "A, B, C and 4 more": the --input paths, for a message about all of them. */
static void input_names(char *out, size_t size, char *const *inputs, int n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && i < 3 && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", inputs[i]);
    if (n > 3 && used < size)
        snprintf(out + used, size - used, " and %d more", n - 3);
}

static int usage_error(const char *msg)
{
    die("%s (usage: zerotrain prepare-data --input PATH... --tokenizer SPEC --out DIR "
        "[--model-type bert|t5] [--lower-case|--no-lower-case] [--shard-tokens N])", msg);
    return 2;
}

int cmd_prepare_data(int argc, char **argv)
{
    prep p;
    const char *spec = NULL;
    char **inputs = NULL;
    int n_inputs = 0, rc = 1;
    double t_start = now();

    memset(&p, 0, sizeof p);
    p.lower = -1;
    p.family = TOK_ANY;
    if (!(inputs = calloc((size_t)argc + 1, sizeof *inputs)))
        return die("out of memory");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--input")) {
            int k = 0;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
                inputs[n_inputs++] = argv[++i], k++;
            if (!k) {
                rc = usage_error("--input needs at least one path");
                goto out;
            }
        } else if (!strcmp(a, "--tokenizer") || !strcmp(a, "--out") ||
                   !strcmp(a, "--shard-tokens") || !strcmp(a, "--model-type")) {
            if (i + 1 >= argc) {
                char msg[64];
                snprintf(msg, sizeof msg, "option %s needs a value", a);
                rc = usage_error(msg);
                goto out;
            }
            if (!strcmp(a, "--tokenizer")) {
                spec = argv[++i];
            } else if (!strcmp(a, "--model-type")) {
                const char *m = argv[++i];
                if (strcmp(m, "bert") && strcmp(m, "t5")) {
                    char msg[300];
                    snprintf(msg, sizeof msg, "--model-type '%.200s' is neither bert nor t5", m);
                    rc = usage_error(msg);
                    goto out;
                }
                p.family = m[0] == 't' ? TOK_T5 : TOK_BERT;
            } else if (!strcmp(a, "--out")) {
                p.out = argv[++i];
            } else {
                long v;
                if (parse_int(argv[++i], "--shard-tokens", 1, 1L << 40, &v)) {
                    rc = 2;
                    goto out;
                }
                p.shard_tokens = (uint64_t)v;
            }
        } else if (!strcmp(a, "--lower-case") || !strcmp(a, "--no-lower-case")) {
            p.lower = a[2] == 'l';
        } else {
            char msg[300];
            snprintf(msg, sizeof msg, "unknown option '%.200s'", a);
            rc = usage_error(msg);
            goto out;
        }
    }
    if (!n_inputs || !spec || !p.out || !p.out[0]) {
        rc = usage_error("--input, --tokenizer and --out are required");
        goto out;
    }
    switch (parse_spec(&p, spec)) {
    case 0:
        break;
    case -1:
        die("unknown tokenizer '%s' (expected wordpiece:VOCAB_TXT, sentencepiece:N"
            "[:unigram|:bpe], spm:MODEL or a Hugging Face model folder)", spec);
        rc = 2;
        goto out;
    default:
        rc = 2;
        goto out;
    }
    p.tty = isatty(2);
    {
        char real[PATH_MAX];
        if (realpath(p.out, real))
            p.out_real = strdup(real);
    }
    /* --out's folder is locked first, so that a second run into it fails at once; an
     * existing --out stays as it is until the new one is complete (outdir.h) */
    if (outdir_lock(p.out, ours, &p.dir, p.err, sizeof p.err) < 0) {
        die("%s", p.err);
        goto out;
    }
    /* everything that can fail on bad input fails here, before anything is written */
    if (collect_inputs(&p, inputs, n_inputs) < 0 || load_tokenizer(&p) < 0 ||
        (p.kind == TOK_SPM_TRAIN && train_spm(&p) < 0)) {
        die("%s", p.err);
        goto out;
    }
    if (!(p.stage = outdir_stage(p.dir, p.err, sizeof p.err))) {
        die("%s", p.err);
        goto out;
    }
    if (zt_token_writer_create(p.stage, &p.tok, p.shard_tokens, &p.w) < 0) {
        die("%s", zt_last_error());
        goto out;
    }
    /* the tokenizer's files, as save_pretrained writes them (and spm_train's spm.vocab) */
    if (tok_save(p.tk, p.stage, 0, p.err, sizeof p.err) < 0 ||
        (p.kind == TOK_SPM_TRAIN &&
         write_output(&p, "spm.vocab", p.vocab_text, p.vocab_len) < 0)) {
        die("%s", p.err);
        goto out;
    }
    if (tokenize_all(&p) < 0) {
        die("%s", p.err);
        goto out;
    }
    if (p.docs == 0) {
        char names[PATH_MAX];
        input_names(names, sizeof names, inputs, n_inputs);
        die("%s: the input%s no text (%zu file%s, no tokens)", names,
            n_inputs > 1 ? "s hold" : " holds", p.files.n, p.files.n == 1 ? "" : "s");
        goto out;
    }
    if (zt_token_writer_finish(p.w) < 0) {
        die("%s", zt_last_error());
        goto out;
    }
    outdir_fault("written");
    if (outdir_commit(p.dir, p.err, sizeof p.err) < 0) {
        die("%s", p.err);
        goto out;
    }
    {
        const uint64_t per = p.shard_tokens ? p.shard_tokens : 64ull << 20, /* the default */
            shards = (p.tokens + per - 1) / per;
        printf("prepare-data: %" PRIu64 " documents, %" PRIu64 " tokens, %" PRIu64 " shard%s, "
               "%.1f s -> %s (%s, vocab %d%s, %s)\n", p.docs, p.tokens, shards,
               shards == 1 ? "" : "s", now() - t_start, p.out, p.tok.type, p.tok.vocab_size,
               p.tok.lower_case ? ", lower-cased" : "", p.tok.hf_class);
    }
    rc = 0;
out:
    zt_token_writer_destroy(p.w);
    outdir_close(p.dir); /* uncommitted: removes the staging folder and the parents it made */
    tok_free(p.tk);
    free(p.model_bytes);
    free(p.vocab_text);
    free(p.buf);
    free(p.out_real);
    paths_free(&p.files);
    free(inputs);
    return rc;
}
