"""TRL's GRPOTrainer on the benchmark's shapes, in the benchmark's process (only if `trl` is installed).

Same model weights (saved in the hub format and loaded as `transformers.GPT2LMHeadModel`), same
tokenizer, prompts from the same problem sampler, same reward function, same settings where TRL has
them: G completions per prompt, prompts_per_step prompts per optimizer step, max_completion_length
= the largest token cap, full length via min_new_tokens, temperature, KL beta, DAPO clip range,
bf16 on CUDA. Generation is transformers' `generate` (TRL without vLLM). A callback times every
optimizer step (with a device sync); the first `bench.warmup` steps are dropped.
"""
from __future__ import annotations

import importlib.util
import statistics
import tempfile
import time

import torch

from rookworld.specs.bench import BenchSpec
from rookworld.specs.rules import resolve_device

GIB = 2 ** 30


def run_trl(spec: BenchSpec, results: dict) -> dict:
    if importlib.util.find_spec("trl") is None:
        return {"status": "not run: trl is not installed"}
    from rookworld.run.build import make_sampler
    try:
        return time_trl(spec, make_sampler(spec.run), results)
    except Exception as error:  # TRL's API moves quickly; a failure is reported next to our numbers
        return {"status": f"failed: {type(error).__name__}: {error}"}


def time_trl(spec: BenchSpec, sampler, results: dict) -> dict:
    import trl

    b, device = spec.bench, resolve_device(spec.run.device)
    steps = int(b.warmup) + int(b.trl_steps)
    problems = sampler.sample(spec.run.prompts_per_step * steps)
    timer = step_timer(device)
    with tempfile.TemporaryDirectory(prefix="rookworld-trl-") as directory:
        model, tokenizer = hf_model(spec, directory)
        trainer = trl.GRPOTrainer(model=model, reward_funcs=reward_function(spec, problems),
                                  args=trl_config(spec, steps, device, f"{directory}/out"),
                                  train_dataset=prompt_dataset(problems), processing_class=tokenizer,
                                  callbacks=[timer])
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        trainer.train()
    timed = timer.seconds[int(b.warmup):]
    summary = {"status": "ran", "trl": trl.__version__, "steps": len(timed),
               "median_s": statistics.median(timed), "min_s": min(timed), "max_s": max(timed)}
    if device.type == "cuda":
        summary["peak_gib"] = torch.cuda.max_memory_allocated() / GIB
    ours = results.get("fast", results.get("plain", {})).get("summary", {}).get("wall", {}).get("median")
    if ours:
        summary["trl_over_ours"] = summary["median_s"] / ours
    return summary


def hf_model(spec: BenchSpec, directory: str):
    """The benchmark's model and tokenizer as transformers objects (through the hub format)."""
    from transformers import GPT2LMHeadModel, PreTrainedTokenizerFast

    from rookworld.bench.models import load_bench_model
    from rookworld.model.hub import save_pretrained

    policy, tokenizer, _ = load_bench_model(spec, torch.device("cpu"))
    save_pretrained(policy, tokenizer, directory)
    model = GPT2LMHeadModel.from_pretrained(directory, dtype=torch.float32)
    eos = tokenizer.decode([tokenizer.eos_id], skip_special_tokens=False)
    hf_tokenizer = PreTrainedTokenizerFast(tokenizer_file=f"{directory}/tokenizer.json", eos_token=eos,
                                           bos_token=eos, pad_token=eos, padding_side="left")
    return model, hf_tokenizer


def prompt_dataset(problems: list):
    """Prompt texts as the trainer tokenises them ([end-of-text] + prompt), with each row's problem index."""
    import datasets

    return datasets.Dataset.from_dict({"prompt": ["<|endoftext|>" + p.prompt_text for p in problems],
                                       "index": list(range(len(problems)))})


def reward_function(spec: BenchSpec, problems: list):
    reward_fn = spec.run.reward.build()

    def reward(prompts, completions, index, **_):
        return [float(reward_fn(problems[i], text).total) for i, text in zip(index, completions)]

    return reward


def trl_config(spec: BenchSpec, steps: int, device: torch.device, output_dir: str):
    import trl

    run = spec.run
    beta = run.kl.coef
    cap = max(int(n) for n in run.sampling.max_new_tokens.values())
    return trl.GRPOConfig(
        output_dir=output_dir, max_steps=steps, report_to="none", logging_steps=1, save_strategy="no",
        per_device_train_batch_size=run.prompts_per_step * run.grpo.group_size, num_generations=run.grpo.group_size,
        gradient_accumulation_steps=1, max_completion_length=cap, temperature=run.sampling.temperature,
        generation_kwargs={"min_new_tokens": cap} if spec.bench.full_length else None, beta=float(beta),
        epsilon=run.grpo.epsilon_low, epsilon_high=run.grpo.epsilon_high, loss_type=run.grpo.loss_type,
        learning_rate=run.optimizer.lr, bf16=device.type == "cuda", use_cpu=device.type != "cuda",
        shuffle_dataset=False, seed=run.seed)


def step_timer(device: torch.device):
    """A TrainerCallback recording the wall time of every optimizer step, synchronised at both ends."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.seconds, self.start = [], 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            sync(device)
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            sync(device)
            self.seconds.append(time.perf_counter() - self.start)

    return StepTimer()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
