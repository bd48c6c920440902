"""The record format: feature keys, the features a record holds, ``tf.train.Example`` encoding
and TFRecord framing. Plain Python; TensorFlow is imported only where records are parsed."""
