"""rookworld: GRPO fine-tuning of RookWorld chess language models with verifiable rewards."""
