;;; synconfroute.el --- AI completion, local first -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: languages, tools, convenience

;;; Commentary:

;; Registers the synconfroute language server (`synconfroute serve') with
;; eglot.  Each completion comes from a model on this machine when it is
;; confident and keeps the file syntactically valid, and from the
;; organisation's large model otherwise.
;;
;;   (require 'synconfroute)
;;   (setq synconfroute-command
;;         '("~/synconfroute/.venv/bin/synconfroute" "serve"))
;;   (synconfroute-setup)
;;
;; Then M-x eglot in a Python, Java, C/C++, JavaScript/TypeScript, Go or
;; Rust buffer.  Completion goes through `completion-at-point' (C-M-i); the
;; route of the completion (local or remote, and why) shows in the echo area
;; and through eldoc on the lines it inserted (and, before that, as eglot's
;; hover); M-x synconfroute-toggle-local-only keeps all code on this
;; machine; M-x synconfroute-status tells which tiers are in use.
;;
;; eglot runs one server per buffer: in `synconfroute-modes' synconfroute
;; replaces the language's usual server (pylsp, clangd...).  Leave a mode
;; out to keep its server.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'eglot)
(require 'eldoc)

(defgroup synconfroute nil
  "Private AI code completion: local model first, remote model when needed."
  :group 'tools
  :prefix "synconfroute-")

(defcustom synconfroute-command '("synconfroute" "serve")
  "Program and arguments that start the language server.
Use the full path when the program is not on `exec-path', for example
\\='(\"~/synconfroute/.venv/bin/synconfroute\" \"serve\")."
  :type '(repeat string))

(defcustom synconfroute-modes
  '(python-mode python-ts-mode java-mode java-ts-mode c-mode c-ts-mode
    c++-mode c++-ts-mode js-mode js-ts-mode typescript-mode typescript-ts-mode
    go-mode go-ts-mode rust-mode rust-ts-mode)
  "Major modes whose buffers `synconfroute-setup' gives to synconfroute."
  :type '(repeat symbol))

(defcustom synconfroute-settings nil
  "Server settings sent as initializationOptions, a plist of sections.
The keys are those of docs/settings.md, for example
  (:local (:backend \"ollama\" :model \"qwen2.5-coder:3b\")
   :remote (:url \"http://gpu-cluster:8000/v1\"
            :model \"Qwen/Qwen2.5-Coder-32B-Instruct\")
   :routing (:threshold -0.5))
Use t and :json-false for booleans.  Per project, set
`eglot-workspace-configuration' to (:synconfroute (...)) in .dir-locals.el;
the server treats those as workspace settings, which may only tighten what
leaves the machine (a server URL there is refused)."
  :type 'sexp)

(defvar synconfroute-last-route nil
  "One line saying how the last completion was routed.")

(defclass synconfroute-server (eglot-lsp-server) ()
  :documentation "The synconfroute language server.")

(defun synconfroute--initialization-options ()
  "`synconfroute-settings' ready for JSON ({} when unset)."
  (or synconfroute-settings (make-hash-table)))

(cl-defmethod eglot-initialization-options ((_server synconfroute-server))
  (synconfroute--initialization-options))

(defun synconfroute--contact (&optional _interactive)
  "The eglot contact for synconfroute: class and command."
  (unless (and (consp synconfroute-command)
               (stringp (car synconfroute-command)))
    (user-error
     "synconfroute: `synconfroute-command' must be a list of strings"))
  (let ((program (car synconfroute-command)))
    (unless (or (file-name-absolute-p program) (executable-find program))
      (user-error
       (concat "synconfroute: `%s' not found on exec-path; install "
               "synconfroute (bash scripts/setup.sh) and set "
               "`synconfroute-command' to "
               "(\"/path/to/.venv/bin/synconfroute\" \"serve\")")
       program)))
  (cons 'synconfroute-server
        (mapcar (lambda (s) (if (string-prefix-p "~" s) (expand-file-name s) s))
                synconfroute-command)))

(defconst synconfroute--language-ids
  '(("c++" . "cpp") ("js" . "javascript"))
  "LSP language ids that differ from the major mode's name.")

(defun synconfroute--mode-spec (mode)
  "MODE with the LSP language id eglot should announce for it."
  (let* ((name (replace-regexp-in-string "\\(-ts\\)?-mode\\'" ""
                                         (symbol-name mode)))
         (id (or (cdr (assoc name synconfroute--language-ids)) name)))
    (list mode :language-id id)))

;;;###autoload
(defun synconfroute-setup ()
  "Register synconfroute with eglot for `synconfroute-modes'."
  (interactive)
  (setq eglot-server-programs
        (cons (cons (mapcar #'synconfroute--mode-spec synconfroute-modes)
                    #'synconfroute--contact)
              (cl-remove #'synconfroute--contact eglot-server-programs
                         :key #'cdr)))
  (add-hook 'eglot-managed-mode-hook #'synconfroute--managed))

(defun synconfroute--server ()
  "The synconfroute server of this buffer, or an error saying what to do."
  (let ((server (eglot-current-server)))
    (unless (cl-typep server 'synconfroute-server)
      (user-error (concat "synconfroute: no synconfroute server manages "
                          "this buffer; M-x eglot first")))
    server))

;;; Completion

(defun synconfroute--item (proxy table)
  "The LSP completion item behind PROXY, a candidate of TABLE."
  (or (get-text-property 0 'eglot--lsp-item proxy)
      ;; Chosen from the *Completions* buffer, PROXY lost its properties.
      (let ((same (cl-find proxy (all-completions "" table) :test #'string=)))
        (and same (get-text-property 0 'eglot--lsp-item same)))))

(defvar-local synconfroute--last nil
  "(START END CARD): markers around the last completion taken, its route card.")

(defun synconfroute--taken (server item start end)
  "ITEM was inserted between START and END: show its route, tell SERVER."
  (let ((detail (plist-get item :detail))
        (doc (plist-get item :documentation))
        (command (plist-get item :command)))
    (when (stringp detail)
      (setq synconfroute-last-route detail)
      (message "%s" detail))
    (setq synconfroute--last
          (list (copy-marker start) (copy-marker end t)
                (cond ((stringp doc) doc)
                      ((consp doc) (plist-get doc :value)))))
    (when command
      ;; The server records that the user took it (with its route).
      (jsonrpc-async-request server :workspace/executeCommand
                             (list :command (plist-get command :command)
                                   :arguments (plist-get command :arguments))
                             :success-fn #'ignore
                             :error-fn #'ignore))))

(defun synconfroute-completion-at-point ()
  "eglot's `completion-at-point', telling the server what was taken."
  (when-let* ((capf (eglot-completion-at-point)))
    (pcase-let* ((`(,beg ,end ,table . ,props) capf)
                 (server (eglot-current-server))
                 (exit (plist-get props :exit-function))
                 (start (copy-marker beg)))
      (append
       (list beg end table)
       (plist-put (copy-sequence props) :exit-function
                  (lambda (proxy status)
                    (let ((item (synconfroute--item proxy table)))
                      (when exit (funcall exit proxy status))
                      (when (and item (memq status '(finished exact)))
                        (synconfroute--taken server item start (point))))))))))

;;; Route in eldoc

(defun synconfroute-eldoc-function (callback)
  "Call CALLBACK with the route card while point is on the last completion."
  (pcase synconfroute--last
    (`(,start ,end ,card)
     (when (and card (marker-buffer start)
                (<= (save-excursion (goto-char start) (line-beginning-position))
                    (point)
                    (save-excursion (goto-char end) (line-end-position))))
       (funcall callback card :echo synconfroute-last-route)
       t))))

(defun synconfroute--managed ()
  "Use synconfroute's completion and eldoc functions where it is the server."
  (if (and (eglot-managed-p)
           (cl-typep (eglot-current-server) 'synconfroute-server))
      (progn
        (remove-hook 'completion-at-point-functions
                     #'eglot-completion-at-point t)
        (add-hook 'completion-at-point-functions
                  #'synconfroute-completion-at-point nil t)
        (add-hook 'eldoc-documentation-functions
                  #'synconfroute-eldoc-function nil t))
    (remove-hook 'completion-at-point-functions
                 #'synconfroute-completion-at-point t)
    (remove-hook 'eldoc-documentation-functions
                 #'synconfroute-eldoc-function t)))

;;; Commands

(defun synconfroute--json-true (value)
  "Non-nil when VALUE is JSON true (not nil, not :json-false)."
  (and value (not (eq value :json-false))))

(defun synconfroute-format-status (status)
  "One line from STATUS, the plist the server's synconfroute.status returns."
  (let ((routes (plist-get status :routes))
        (last (plist-get status :last)))
    (format (concat "synconfroute: local %s; remote %s; local-only %s; "
                    "%s completions (%s local, %s remote, %s none), "
                    "%s taken; last: %s")
            (plist-get status :local) (plist-get status :remote)
            (if (synconfroute--json-true (plist-get status :local_only))
                "on" "off")
            (plist-get status :completions)
            (plist-get routes :local) (plist-get routes :remote)
            (plist-get routes :none)
            (plist-get status :accepted)
            (if (stringp last) last "-"))))

(defun synconfroute-status ()
  "Show the tiers the server uses and how completions were routed.
Returns the status plist."
  (interactive)
  (let ((status (eglot-execute-command (synconfroute--server)
                                       'synconfroute.status [])))
    (message "%s" (synconfroute-format-status status))
    status))

(defun synconfroute-toggle-local-only ()
  "Toggle local-only (no code leaves this machine).  Returns the new state."
  (interactive)
  (let ((on (synconfroute--json-true
             (eglot-execute-command (synconfroute--server)
                                    'synconfroute.toggleLocalOnly []))))
    (message "synconfroute: local-only %s"
             (if on "ON: nothing leaves this machine" "off"))
    on))

(provide 'synconfroute)
;;; synconfroute.el ends here
