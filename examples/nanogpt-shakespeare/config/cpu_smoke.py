# CPU smoke test: a tiny model that finishes in seconds on one CPU thread (torch 1.13 or newer).
# python train.py config/cpu_smoke.py
device = 'cpu'
dtype = 'float32'
threads = 1
n_layer = 2
n_head = 2
n_embd = 32
block_size = 32
dropout = 0.0
batch_size = 8
gradient_accumulation_steps = 1
max_iters = 200
learning_rate = 3e-3
warmup_iters = 20
lr_decay_iters = 200
min_lr = 3e-4
eval_interval = 100
eval_iters = 5
log_interval = 10
checkpoint_interval = 50
peak_flops = 1e11  # rough single-core figure, only scales the mfu column
