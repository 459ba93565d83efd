/* zerotrain.c - the command-line tool's entry point: MPI set-up where a command needs it,
 * logging to stderr, dispatch to the commands (cmd_*.c). Built only on the public API. */
#include "cli.h"
#include "zerotrain_faults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void log_to_stderr(int level, const char *msg, void *user)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    (void)user;
    fprintf(stderr, "zerotrain: %s: %s\n", names[level & 3], msg);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zerotrain <command> [options]\n"
            "\n"
            "commands:\n"
            "  grad     --model DIR --batch FILE --out FILE [--step STEP_JSON] [--threads N]\n"
            "           [--no-logits]\n"
            "           one forward+backward of a Hugging Face model folder on a batch file;\n"
            "           writes loss, logits, grad.<name> (and adamw.<name>, or lamb.<name> when\n"
            "           the step JSON names \"Lamb\", with --step); --no-logits: no logits, the\n"
            "           pass training runs (the labelled rows' head, T5's padding left out)\n"
            "  train    --model DIR|PRESET|CONFIG_JSON --data DIR|synthetic[:SEED] [--config DS_JSON]\n"
            "           [--seq-len T] [--steps N] [--seed S] [--threads N]\n"
            "           [--checkpoint-dir D] [--checkpoint-every K] [--keep K] [--resume]\n"
            "           [--overwrite]   (a new run into a folder of another run's checkpoints:\n"
            "           they are removed once this run has saved its first; --keep only ever\n"
            "           removes this run's own)\n"
            "           [--resume-from D/step-N]   (with --steps N: saved again into\n"
            "           --checkpoint-dir for this world size and stage)\n"
            "           [--save-model DIR [--save-model-dtype fp32|bf16|fp16]] [--metrics FILE]\n"
            "           (a bf16 run saves bf16 weights by default)\n"
            "           [--collective-timeout SECONDS] [--check-collectives]\n"
            "           [--profile] [--summary FILE] [--warmup K]   per-kernel profile table,\n"
            "           benchmark summary JSON; the first K steps (default 1) not counted\n"
            "           [--eval-data DIR --eval-every K [--eval-samples N]]\n"
            "           masked-LM training (presets: bert-tiny, bert-mini, bert-small,\n"
            "           bert-medium, bert-base, bert-large)\n"
            "  finetune --model DIR|PRESET|CONFIG_JSON --task classify --train FILE [--eval FILE]\n"
            "           [--text-field text] [--text-pair-field F] [--label-field label]\n"
            "           [--tokenizer wordpiece:VOCAB_TXT|spm:MODEL|sentencepiece:N] (a preset or\n"
            "           config.json needs one; a folder has its own) [--eval-every K], train's options\n"
            "           (--config, --steps, --seq-len, checkpoints, --resume, --save-model,\n"
            "           --metrics, ...): a BertForSequenceClassification on labelled JSON Lines,\n"
            "           CSV or TSV rows; eval_loss, eval_accuracy, eval_f1_macro (eval_mse)\n"
            "  finetune --model T5_DIR|PRESET|CONFIG_JSON --task text2text --train FILE [--eval FILE]\n"
            "           [--input-field input] [--target-field target] [--target-len 128]\n"
            "           [--tokenizer spm:MODEL|sentencepiece:N] [--eval-every K], train's options:\n"
            "           T5ForConditionalGeneration on input -> target pairs, teacher-forced;\n"
            "           eval_loss, eval_token_accuracy, eval_exact_match (greedy)\n"
            "  predict  --model DIR --task classify --input FILE --output FILE [--text-field text]\n"
            "           [--text-pair-field F] | --task fill-mask --text \"... [MASK] ...\" [--top-k 5]\n"
            "           | --task generate --input FILE --output FILE [--input-field input]\n"
            "           [--max-new-tokens 20] [--num-beams 1] [--length-penalty 1.0]\n"
            "           [--early-stopping [true|false|never]] [--no-cache] [--with-ids]\n"
            "           [--config DS_JSON] [--batch-size N] [--seq-len T] [--threads N]\n"
            "           a trained folder, forward only (no gradients or optimizer state);\n"
            "           classify: one JSON line per row {\"label\", \"scores\"}; fill-mask: one\n"
            "           per candidate and [MASK] {\"token\", \"score\", \"position\"};\n"
            "           generate (a T5): one per row {\"generated\"} (--with-ids: \"ids\", \"score\"),\n"
            "           greedy or beam search over the decoder's key/value caches\n"
            "  export   --checkpoint D/step-N --out DIR [--max-shard-size BYTES]\n"
            "           [--save-model-dtype fp32]   a training checkpoint as a Hugging Face\n"
            "           folder, in its weights' dtype or (a bf16 / fp16 run's) the fp32 master\n"
            "  estimate (--model MODEL | --params N) --ranks N --stage S [--precision fp32|bf16|fp16]\n"
            "           [--optimizer adamw|adamw8bit|adafactor|lamb] [--offload-optimizer none|cpu|nvme]\n"
            "           [--offload-param none|cpu|nvme] [--micro-batch B --seq-len T\n"
            "           [--recompute MODE]] [--json]   bytes per rank (model states, buffers,\n"
            "           activations, NVMe) before anything is allocated\n"
            "  check-config FILE [WORLD_SIZE [STEPS]]  validate a DeepSpeed-style config\n"
            "  config-reference   print the config reference (docs/config.md)\n"
            "  inspect  FILE      list the tensors of a safetensors file\n"
            "  prepare-data --input PATH... --tokenizer SPEC --out DIR\n"
            "           [--lower-case|--no-lower-case] [--shard-tokens N]   text files (folders\n"
            "           walked, one document per file) -> token shards + manifest.json; SPEC is\n"
            "           wordpiece:VOCAB_TXT, sentencepiece:N[:bpe] (trains one) or spm:MODEL\n"
            "  version            print the version\n");
}
static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    int needs_mpi;
} commands[] = {
    {"grad", cmd_grad, 0},
    {"inspect", cmd_inspect, 0},
    {"prepare-data", cmd_prepare_data, 0},
    {"train", cmd_train, 1},
    {"finetune", cmd_finetune, 1},
    {"predict", cmd_predict, 1},
    {"export", cmd_export, 0},
    {"check-config", cmd_check_config, 0},
    {"estimate", cmd_estimate, 0},
    {"config-reference", cmd_config_reference, 0},
};

/* The command is also the test suite's driver: ZT_FAULT_POINT="before:NAME[@K]",
 * ZT_FAULT_IO="odirect,nouring", ZT_FAULT_STALL="rank:seq", ZT_FAULT_SKIP_UNIT="rank:unit"
 * and ZT_MEMORY_TOTAL=bytes become the library's fault hooks (zerotrain_faults.h). */
static void fault_hooks_from_env(void)
{
    zt_fault_hooks h;
    const char *v;
    int any = 0;
    zt_fault_hooks_init(&h);
    if ((v = getenv("ZT_FAULT_POINT")) && *v)
        any = snprintf(h.point, sizeof h.point, "%s", v) > 0;
    if ((v = getenv("ZT_FAULT_IO"))) {
        h.io_no_odirect = strstr(v, "odirect") != NULL;
        h.io_no_uring = strstr(v, "nouring") != NULL;
        any |= h.io_no_odirect || h.io_no_uring;
    }
    if ((v = getenv("ZT_FAULT_STALL")))
        any |= sscanf(v, "%d:%lld", &h.stall_rank, &h.stall_seq) == 2;
    if ((v = getenv("ZT_FAULT_SKIP_UNIT")))
        any |= sscanf(v, "%d:%d", &h.skip_rank, &h.skip_unit) == 2;
    if ((v = getenv("ZT_MEMORY_TOTAL")) && *v)
        any |= (h.memory_total = strtod(v, NULL)) > 0.0;
    if (any)
        zt_fault_hooks_set(&h);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    zt_log_set(log_to_stderr, NULL, ZT_LOG_WARN);
    fault_hooks_from_env();
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("zerotrain %s\n", zt_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        int rc, provided = 0;
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        if (!commands[i].needs_mpi)
            return commands[i].run(argc - 2, argv + 2);
        /* the collective watchdog may call MPI_Abort from its own thread */
        if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return die("MPI_Init_thread failed");
        if (provided < MPI_THREAD_MULTIPLE) {
            MPI_Finalize();
            return die("this MPI library does not provide MPI_THREAD_MULTIPLE (provided level "
                       "%d), which the collective watchdog needs", provided);
        }
        rc = commands[i].run(argc - 2, argv + 2);
        MPI_Finalize();
        return rc;
    }
    return die("unknown command '%s' (see 'zerotrain --help')", argv[1]), 2;
}
