;;; e2e_lib.el --- what every Emacs e2e script of tests/editors shares  -*- lexical-binding: t; -*-

;; Loaded by each script (`load' next to it): the observations it writes as JSON to
;; $SYNCONFROUTE_E2E_RESULT for tests/test_editors.py, and a bounded wait on the server.

;;; Code:

(require 'json)

(defvar e2e-out nil "Alist of observations, written as JSON.")
(defvar e2e-step "start")
(defvar e2e-wait-seconds 20 "How long `e2e-wait' waits by default.")
(defvar e2e-poll-seconds 0.05 "How often `e2e-wait' asks its predicate.")

(defun e2e-put (key value)
  (push (cons key value) e2e-out))

(defun e2e-finish (err)
  (e2e-put "error" err)
  (e2e-put "step" e2e-step)
  (with-temp-file (getenv "SYNCONFROUTE_E2E_RESULT")
    (insert (json-encode e2e-out)))
  (kill-emacs 0))

(defun e2e-wait (what pred &optional seconds)
  "Process input until PRED returns non-nil (its value), or fail after SECONDS."
  (setq e2e-step what)
  (let ((deadline (+ (float-time) (or seconds e2e-wait-seconds)))
        value)
    (while (not (setq value (funcall pred)))
      (when (> (float-time) deadline)
        (error "Timed out waiting for %s" what))
      (accept-process-output nil e2e-poll-seconds))
    value))

;; -- the embedded worker's KV cache, seen through eglot (the prefill scripts) ----------

(defun e2e-worker ()
  "The server's embedded worker, as `synconfroute.status' reports it."
  (plist-get (eglot-execute-command (eglot-current-server) 'synconfroute.status [])
             :local_worker))

(defun e2e-open-managed (file)
  "Open FILE under eglot; the worker's status once it runs."
  (find-file file)
  (unless (eglot-managed-p)             ; the project's server takes on later files itself
    (call-interactively #'eglot))
  (e2e-wait "the buffer to be managed" #'eglot-managed-p)
  (e2e-wait "the worker" (lambda () (let ((w (e2e-worker)))
                                      (and (plist-get w :pid) w)))))

(defun e2e-prompt-reuse (w0 rest what ask)
  "Rest REST seconds (nil: until a prefill ran since W0, WHAT names it), then call ASK;
the share of the asked completion's prompt tokens the KV cache held, and the prefills."
  (let (before after)
    (if rest
        (progn (sleep-for rest) (setq before (e2e-worker)))
      (setq before (e2e-wait what
                             (lambda () (let ((w (e2e-worker)))
                                          (and (> (plist-get w :prefills)
                                                  (plist-get w0 :prefills))
                                               w))))))
    (funcall ask)
    (setq after (e2e-wait "the completion's prompt"
                          (lambda () (let ((w (e2e-worker)))
                                       (and (> (plist-get w :prompt_tokens)
                                               (plist-get before :prompt_tokens))
                                            w)))))
    (list (cons "share" (/ (float (- (plist-get after :cached_tokens)
                                     (plist-get before :cached_tokens)))
                           (max 1 (- (plist-get after :prompt_tokens)
                                     (plist-get before :prompt_tokens)))))
          (cons "prefills" (- (plist-get before :prefills) (plist-get w0 :prefills))))))

(provide 'e2e_lib)
;;; e2e_lib.el ends here
