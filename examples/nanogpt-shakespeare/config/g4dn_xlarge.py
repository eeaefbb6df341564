# g4dn.xlarge (one NVIDIA T4, 16 GB): a ~25M-parameter character model, a few hours of training.
# python train.py config/g4dn_xlarge.py
device = 'cuda'
dtype = 'float16'  # the T4 has fp16 tensor cores but no bfloat16
n_layer = 8
n_head = 8
n_embd = 512
block_size = 256
dropout = 0.2
batch_size = 64
gradient_accumulation_steps = 1
max_iters = 20000
learning_rate = 6e-4
warmup_iters = 500
lr_decay_iters = 20000
min_lr = 6e-5
weight_decay = 0.1
beta2 = 0.99
eval_interval = 500
eval_iters = 100
log_interval = 20
checkpoint_interval = 500
peak_flops = 65e12  # T4 fp16 tensor-core peak
